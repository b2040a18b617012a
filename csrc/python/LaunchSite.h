// LaunchSite.h - installs the Python launch-site provider used to attribute device task errors.
#pragma once

#include "csrc/framework/DeviceTask.h"

namespace torch_npu::python {

void installLaunchSiteProvider();

}  // namespace torch_npu::python
