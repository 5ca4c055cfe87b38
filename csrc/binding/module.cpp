// Python entry point of iognn._C. Importing the module loads this shared library, whose static
// TORCH_LIBRARY registrations define the iognn::* operators; the module itself exports nothing.
#include <Python.h>

extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C",
                               "iognn operator library (ops are reached through torch.ops.iognn)",
                               -1, nullptr};
  return PyModule_Create(&module);
}
