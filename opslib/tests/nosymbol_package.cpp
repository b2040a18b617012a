// nosymbol_package.cpp - a shared library in a custom op path that is not an op package: it lacks
// npu_opslib_register_package, so the registry must skip it with a warning.
extern "C" __attribute__((visibility("default"))) int npu_opslib_not_a_package(void) { return 0; }
