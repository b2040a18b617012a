# TorchNpuConfig.cmake - find_package(TorchNpu) for building custom op packages against torch_npu's
# op library (no PyTorch needed):
#
#   list(APPEND CMAKE_PREFIX_PATH <output of: python -c "import torch_npu; print(torch_npu.utils.cmake_prefix_path)">)
#   find_package(TorchNpu REQUIRED)
#   torch_npu_add_op_package(cust_opapi VENDOR customize
#                            SOURCES op_api/aclnn_add_custom.cpp
#                            HEADERS op_api/aclnn_add_custom.h)
#
# and `cmake --install build --prefix <opp root>` lays the package out as Ascend's custom op packages
# are: <opp root>/vendors/customize/op_api/lib/libcust_opapi.so, .../op_api/include/aclnn_add_custom.h,
# with "customize" put first in the load_priority of <opp root>/vendors/config.ini. Point
# ASCEND_CUSTOM_OPP_PATH at <opp root> (or at <opp root>/vendors/customize) before torch_npu runs.
#
# Provides: TORCH_NPU_INCLUDE_DIRS, TORCH_NPU_LIBRARY_DIR, imported targets TorchNpu::opslib and
# TorchNpu::runtime, and torch_npu_add_op_package().

get_filename_component(TORCH_NPU_ROOT "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(TORCH_NPU_INCLUDE_DIRS "${TORCH_NPU_ROOT}/include")
set(TORCH_NPU_LIBRARY_DIR "${TORCH_NPU_ROOT}/lib")

foreach(_torch_npu_lib runtime opslib)
  set(_torch_npu_file "${TORCH_NPU_LIBRARY_DIR}/libnpu_${_torch_npu_lib}.so")
  if(NOT EXISTS "${_torch_npu_file}")
    set(TorchNpu_FOUND FALSE)
    set(TorchNpu_NOT_FOUND_MESSAGE "${_torch_npu_file} is missing: reinstall torch_npu")
    return()
  endif()
  if(NOT TARGET TorchNpu::${_torch_npu_lib})
    add_library(TorchNpu::${_torch_npu_lib} SHARED IMPORTED)
    set_target_properties(TorchNpu::${_torch_npu_lib} PROPERTIES
      IMPORTED_LOCATION "${_torch_npu_file}"
      INTERFACE_INCLUDE_DIRECTORIES "${TORCH_NPU_INCLUDE_DIRS}")
  endif()
endforeach()
set_property(TARGET TorchNpu::opslib PROPERTY INTERFACE_LINK_LIBRARIES TorchNpu::runtime)

# torch_npu_add_op_package(<target> VENDOR <name> SOURCES <file>... [HEADERS <file>...])
# builds lib<OUTPUT_NAME>.so (libcust_opapi.so unless the target sets OUTPUT_NAME) exporting the
# package's aclnnXxxGetWorkspaceSize / aclnnXxx functions, and installs it with its headers under
# vendors/<name>/op_api.
function(torch_npu_add_op_package target)
  cmake_parse_arguments(ARG "" "VENDOR" "SOURCES;HEADERS" ${ARGN})
  if(NOT ARG_VENDOR OR NOT ARG_SOURCES)
    message(FATAL_ERROR "torch_npu_add_op_package(${target}): VENDOR <name> and SOURCES <files> are required")
  endif()
  if(ARG_VENDOR MATCHES "[/,= ]")
    message(FATAL_ERROR "torch_npu_add_op_package(${target}): vendor name \"${ARG_VENDOR}\" may not contain '/', ',', '=' or spaces")
  endif()
  add_library(${target} SHARED ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME cust_opapi
    BUILD_RPATH "${TORCH_NPU_LIBRARY_DIR}"
    INSTALL_RPATH "${TORCH_NPU_LIBRARY_DIR}")
  target_link_libraries(${target} PRIVATE TorchNpu::opslib)
  if(ARG_HEADERS)
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION vendors/${ARG_VENDOR}/op_api/lib)
  if(ARG_HEADERS)
    install(FILES ${ARG_HEADERS} DESTINATION vendors/${ARG_VENDOR}/op_api/include)
  endif()
  # vendors/config.ini: this vendor first, the others after it in their previous order.
  install(CODE "
    set(_config \"\${CMAKE_INSTALL_PREFIX}/vendors/config.ini\")
    set(_vendors \"${ARG_VENDOR}\")
    if(EXISTS \"\${_config}\")
      file(STRINGS \"\${_config}\" _lines REGEX \"^[ \\t]*load_priority[ \\t]*=\")
      foreach(_line IN LISTS _lines)
        string(REGEX REPLACE \"^[^=]*=\" \"\" _old \"\${_line}\")
        string(REPLACE \",\" \";\" _old \"\${_old}\")
        foreach(_vendor IN LISTS _old)
          string(STRIP \"\${_vendor}\" _vendor)
          if(_vendor AND NOT _vendor STREQUAL \"${ARG_VENDOR}\")
            list(APPEND _vendors \"\${_vendor}\")
          endif()
        endforeach()
      endforeach()
    endif()
    list(JOIN _vendors \",\" _joined)
    message(STATUS \"Load priority: \${_config}: load_priority=\${_joined}\")
    file(WRITE \"\${_config}\" \"load_priority=\${_joined}\\n\")
  ")
endfunction()
