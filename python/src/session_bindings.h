// The Session half of fuseopt._fuseopt (session_bindings.cc); bindings.cc
// registers it from the module's init.
#pragma once
#include <pybind11/pybind11.h>

void fuseopt_bind_session(pybind11::module_& m);
