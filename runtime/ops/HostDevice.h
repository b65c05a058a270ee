//===- HostDevice.h - functions every backend compiles for its device -----===//
//
// The per-element formulas of some ops (an optimizer's update, a
// derivative, an elementwise function) are written once, in this layer's
// *Ops.h headers, and compiled by every backend: ZPLAN_HOST_DEVICE marks
// them __host__ __device__ when nvcc compiles the including file, and is
// empty for the host compiler (the CPU kernels, and the CUDA emulation in
// test/emulation). One definition is what keeps the backends' results
// equal.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_HOSTDEVICE_H
#define ZPLAN_RUNTIME_OPS_HOSTDEVICE_H

#ifdef __CUDACC__
#define ZPLAN_HOST_DEVICE __host__ __device__
#else
#define ZPLAN_HOST_DEVICE
#endif

#endif // ZPLAN_RUNTIME_OPS_HOSTDEVICE_H
