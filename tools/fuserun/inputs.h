// fuserun's model inputs: the shared code in src/cli/model_inputs.h (also
// used by fuseopt --input-shape / --check), under fuserun's names.
#pragma once
#include "cli/model_inputs.h"

namespace fuseopt::fuserun {

using cli::CheckData;
using cli::generate_inputs;
using cli::parse_shape_flags;
using cli::read_check_dir;
using cli::resolve_input_shapes;
using cli::ShapeOverrides;

}  // namespace fuseopt::fuserun
