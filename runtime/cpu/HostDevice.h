//===- HostDevice.h - functions both the CPU and the CUDA kernels call ----===//
//
// The per-element formulas of some kernels (an optimizer's update, a
// derivative) are written once, in the CPU kernels' *Support.h headers, and
// compiled for both backends: ZPLAN_HOST_DEVICE marks them __host__
// __device__ when nvcc compiles the including file, and is empty for the
// host compiler. One definition is what keeps the backends' results equal.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_HOSTDEVICE_H
#define ZPLAN_RUNTIME_CPU_HOSTDEVICE_H

#ifdef __CUDACC__
#define ZPLAN_HOST_DEVICE __host__ __device__
#else
#define ZPLAN_HOST_DEVICE
#endif

#endif // ZPLAN_RUNTIME_CPU_HOSTDEVICE_H
