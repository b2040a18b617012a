// HostRegister.h - host memory registered as pinned with nrtHostRegister.
#ifndef NPU_RUNTIME_SRC_HOST_REGISTER_H_
#define NPU_RUNTIME_SRC_HOST_REGISTER_H_

namespace npu::runtime {

bool IsRegisteredHostPtr(const void* ptr);  // inside a registered range

}  // namespace npu::runtime

#endif  // NPU_RUNTIME_SRC_HOST_REGISTER_H_
