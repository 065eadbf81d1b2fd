// Dims a model fixes by itself. TorchScript bakes a traced length into view() targets
// (nn.MultiheadAttention's k.view(16, B·H, D) next to a dynamic-axes input [batch, seq, E]):
// the Reshape then accepts only seq = 16 (its element count seq·B·E must equal 16·B·H·D), so
// every run of the model has seq = 16. The pass manager binds such a symbol to its value in
// the graph inputs' shapes for the passes (the attention proofs then see one length where the
// export mixes a symbol and a constant) and restores the declared shapes afterwards: a rewrite
// proven for seq = 16 is exact on every input the original model accepts.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace fuseopt {

struct ForcedDim {
  std::string symbol;  // a dim name of a graph input
  int64_t value;
  std::string reshape;  // the node's label that forces it
};

// The bindings live Reshapes of the main graph force (Reshapes no graph output depends on
// are left out: a runtime may skip them). A symbol two Reshapes force to different values
// (the model runs on no input) is left alone.
std::vector<ForcedDim> forced_dims(const Graph& g);

// Binds each forced symbol in the graph inputs' and outputs' shapes (one warning per binding
// names the Reshape) and restores the declared shapes in restore().
class ForcedDimBinding {
 public:
  // Returns true when something was bound (shapes need inferring again).
  bool bind(Graph& g);
  void restore(Graph& g);

 private:
  std::vector<std::pair<std::string, Shape>> declared_;  // by name: rewrites may replace an output
};

}  // namespace fuseopt
