"""Just enough of the ONNX protobuf wire format for the census and the golden
check, without the onnx package (whose import alone costs more than a second
per test): nodes (op type, domain; subgraphs and functions included), opset
imports, the IR version, and initializers (name, dims, data type).

Field numbers are onnx.proto3's: ModelProto ir_version 1, opset_import 8,
graph 7, functions 25; GraphProto node 1, initializer 5; NodeProto op_type 4,
domain 7, attribute 5; AttributeProto g 6, graphs 11; FunctionProto node 7;
OperatorSetIdProto domain 1, version 2; TensorProto dims 1, data_type 2, name 8.
"""

FLOAT, DOUBLE = 1, 11


def _varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(data):
    """(field number, wire type, value) of one message; a length-delimited
    value is a memoryview of its bytes."""
    data = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = bytes(data[pos:pos + 8]), pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = bytes(data[pos:pos + 4]), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _nodes(graph_bytes, node_field=1):
    for number, _, value in fields(graph_bytes):
        if number != node_field:
            continue
        op_type = domain = ""
        subgraphs = []
        for n, _, v in fields(value):
            if n == 4:
                op_type = bytes(v).decode()
            elif n == 7:
                domain = bytes(v).decode()
            elif n == 5:
                for an, _, av in fields(v):
                    if an in (6, 11):
                        subgraphs.append(av)
        yield domain, op_type
        for sub in subgraphs:
            yield from _nodes(sub)


class Model:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        self.ir_version = 0
        self.opsets = []
        self.nodes = []
        self.initializers = []  # (name, dims, data type)
        for number, _, value in fields(data):
            if number == 1:
                self.ir_version = value
            elif number == 8:
                domain, version = "", 0
                for n, _, v in fields(value):
                    if n == 1:
                        domain = bytes(v).decode()
                    elif n == 2:
                        version = v
                self.opsets.append((domain, version))
            elif number == 7:
                self.nodes.extend(_nodes(value))
                for n, wire, v in fields(value):
                    if n == 5:
                        self.initializers.append(_tensor_header(v))
            elif number == 25:
                self.nodes.extend(_nodes(value, node_field=7))

    def trainable(self):
        """zcc's parameters: float initializers of more than one element."""
        out = []
        for name, dims, dtype in self.initializers:
            count = 1
            for d in dims:
                count *= d
            if dtype in (FLOAT, DOUBLE) and count > 1:
                out.append((name, tuple(dims)))
        return out


def _tensor_header(data):
    name, dims, dtype = "", [], 0
    for n, wire, v in fields(data):
        if n == 1:
            if wire == 2:  # packed
                pos, view = 0, v
                while pos < len(view):
                    d, pos = _varint(view, pos)
                    dims.append(d)
            else:
                dims.append(v)
        elif n == 2:
            dtype = v
        elif n == 8:
            name = bytes(v).decode()
    return name, dims, dtype
