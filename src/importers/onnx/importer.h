// The ONNX importer's working state (docs/onnx.md): one pass over the graph's nodes in their
// (topological) order, each turned into build-time values or planrt IR nodes.
//
// Every ONNX value becomes a Value, which is one of
//   - known: its contents are known when the program is built (initializers, Constant,
//     and anything computed from known values only: folded here, never at run time);
//   - symbolic: a 0-d or 1-d integer tensor whose entries are expressions over the
//     method's dims (what Shape and the arithmetic on shapes produce: [B, S, 8*S]);
//   - run time: an IR value (`ir`) that a planrt op computes.
// A Value's `shape` is ONNX's (logical) one. A run-time value's IR shape is the same
// except where ONNX merges leading dims into a product planrt cannot express (S*B rows
// before a Gemm): then the IR keeps the unmerged dims and `folded` says how many leading
// IR dims make logical dim 0; only row-wise ops (matmul by a constant, bias add, unary
// ops, norms over the last dim) accept such a value, and a reshape back restores it.
//
// Ownership: Values share known tensors' bytes (the parsed model, mapped external data,
// or folded results); the IR constants made from them hold the same owners.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builder/graph.h"
#include "builder/sym_shape.h"
#include "importers/onnx/onnx_tensor.h"
#include "planrt/importers/onnx.h"

namespace onnx {
class ModelProto;
class NodeProto;
class AttributeProto;
class GraphProto;
class ValueInfoProto;
}  // namespace onnx

namespace planrt::importers::onnx {

namespace ir = builder::ir;

// coeff * product of dims: an integer known at build time when `dims` is empty.
using SymInt = ir::Monomial;
SymInt sym_const(int64_t v);
bool sym_is_const(const SymInt& s);
std::string sym_to_string(const SymInt& s, const std::vector<ir::DimDecl>& dims);

struct Value {
  Elem elem = Elem::Float;
  std::vector<SymInt> shape;               // ONNX's shape
  std::optional<Tensor> known;             // contents known at build time
  std::optional<std::vector<SymInt>> sym;  // symbolic contents (rank <= 1, integers)
  // 0, 1, ..., n-1 with n a dim expression (Range(0, seq, 1): position ids), laid out along
  // the one dim of `shape` that is not 1.
  std::optional<SymInt> iota;
  // A known tensor seen through a window: the values are window_base[0:shape[0], ...], the
  // base being as large as the shape's largest size (a mask sliced to [seq, seq] from a
  // [max, max] buffer, or filled to a dim-shaped size by ConstantOfShape).
  std::optional<Tensor> window_base;
  // A run-time value (`ir`) on which a causal mask is applied to its last two dims (key j
  // after query i set to -inf): only a Softmax may read it (then as attention, patterns.cpp).
  bool causal = false;
  std::string ir;                          // the IR value holding it at run time
  ir::SymShape ir_shape;                   // that IR value's shape
  int folded = 0;                          // IR leading dims merged into dim 0 (0: none)

  bool is_runtime() const { return !known && !sym && !iota && !window_base; }
  int rank() const { return static_cast<int>(shape.size()); }
};

class Importer;

// One ONNX op: the attributes it accepts and what it does with a node.
struct OpContext {
  Importer& im;
  const ::onnx::NodeProto& node;
  std::vector<const Value*> in;  // nullptr for an absent optional input
  std::vector<Value> out;        // one per node output, filled by the handler

  bool has(size_t i) const { return i < in.size() && in[i] != nullptr; }
  const Value& input(size_t i) const { return *in[i]; }
  // Attributes (absent: the fallback; present with another type: InvalidArgument).
  const ::onnx::AttributeProto* attr(std::string_view name) const;
  Result<int64_t> attr_int(std::string_view name, std::optional<int64_t> fallback) const;
  Result<double> attr_float(std::string_view name, std::optional<double> fallback) const;
  Result<std::string> attr_string(std::string_view name, std::optional<std::string> fallback) const;
  Result<std::optional<std::vector<int64_t>>> attr_ints(std::string_view name) const;
  // An input or attribute that must be known when the program is built, as integers.
  Result<std::vector<int64_t>> known_ints(size_t i, std::string_view role) const;
  // An integer input known or symbolic (a shape), as dim expressions.
  Result<std::vector<SymInt>> sym_ints(size_t i, std::string_view role) const;
  Status error(std::string message) const;

  // Slice's bounds (attributes before opset 10, inputs after), defaults filled in (axes
  // 0..n-1, steps 1) and lengths checked.
  struct SliceArgs {
    std::vector<SymInt> starts, ends;
    std::vector<int64_t> axes, steps;
  };
  Result<SliceArgs> slice_args() const;
};

using Handler = Status (*)(OpContext& c);
struct OpSpec {
  std::string_view op;
  int min_inputs;   // the first min_inputs must be present
  int max_inputs;   // -1: any number
  int max_outputs;  // -1: any number (at least one)
  std::initializer_list<std::string_view> attrs;
  Handler handler;
};
// Every ONNX op the importer handles (ops.cpp); nullptr for an unknown one.
const OpSpec* find_op_spec(std::string_view op);
std::vector<std::string_view> supported_ops();

// Build-time evaluation (fold.cpp): the outputs of `c.node` when every input is known or
// symbolic; false when the op has no build-time rule (then it runs at run time).
Result<bool> try_fold(OpContext& c);

class Importer {
 public:
  Importer(std::shared_ptr<const ::onnx::ModelProto> model, std::string model_dir,
           const OnnxImportOptions& options);
  Result<builder::Model> run();

  // ---- what handlers use ---------------------------------------------------------------
  int64_t opset() const { return opset_; }
  const OnnxImportOptions& options() const { return options_; }
  const std::vector<ir::DimDecl>& dims() const { return method_.dims; }
  // Softmax outputs over causally masked scores: each must become a causal attention.
  void mark_causal_softmax(const std::string& ir_name) { causal_softmax_.insert(ir_name); }

  // The IR value (or constant) holding `v` at run time, with its dims unmerged when
  // `unfold` (a reshape to ONNX's shape is emitted; an error when that shape is not
  // expressible). Known values become IR constants (once each).
  // What to pass, in the caller's terms (OnnxImportOptions::spelling): a bound for dim
  // `name` ("--dim S=MIN..MAX" / "dims={'S': (MIN, MAX)}"; `bound` replaces MIN..MAX when
  // given), and a build-time value for graph input `name` ("NAME" when empty).
  std::string dim_setting(std::string_view name, std::string_view bound = "") const;
  std::string input_value_setting(std::string_view name = "") const;
  Result<std::string> ir_of(const Value& v, bool unfold = true);
  // Appends an IR node `op` over IR operands; its one output is a fresh IR value named
  // after `name_hint`. The output's IR type is planrt's own shape inference.
  Result<Value> emit(std::string op, std::vector<std::string> inputs, ir::Attrs attrs,
                     const std::string& name_hint);
  // A constant IR tensor made at build time (converted to `dtype`).
  Result<std::string> constant(const Tensor& t, const std::string& name_hint);
  const ir::TensorType* ir_type(const std::string& ir_name) const;

  Result<ir::SymShape> to_ir_shape(const std::vector<SymInt>& shape) const;
  // planrt's reshape attribute for `target`: sizes, dim names, and at most one -1 (an
  // entry that is a multiple of a dim); NotSupported for two of those.
  Result<ir::ShapeSpec> reshape_spec(const ir::SymShape& target) const;
  static std::vector<SymInt> from_ir_shape(const ir::SymShape& shape);
  std::string shape_str(const std::vector<SymInt>& shape) const;

 private:
  Status read_dims_and_inputs();
  Status read_initializers();
  Status check_ops_supported() const;
  Status import_nodes();
  Status check_declared_output(const ::onnx::ValueInfoProto& out, const Value& v) const;
  Status import_outputs();
  Status import_node(const ::onnx::NodeProto& node, size_t index);
  std::string unique_name(const std::string& hint);
  Result<std::string> sym_at_run_time(const Value& v);

  std::shared_ptr<const ::onnx::ModelProto> model_;
  std::string model_dir_;
  OnnxImportOptions options_;
  int64_t opset_ = 0;

  ir::Model ir_model_;
  ir::Method method_;
  std::map<std::string, Value> values_;               // by ONNX name
  std::map<std::string, ir::TensorType> ir_types_;    // IR values and constants
  std::map<const void*, std::string> constant_names_; // known bytes -> IR constant
  std::set<std::string> used_names_;
  std::set<std::string> reserved_;       // every ONNX name of the graph
  std::set<std::string> graph_outputs_;
  std::set<std::string> read_names_;     // every name some node reads
  std::string current_block_;                         // of the node being imported
  std::vector<std::string> node_blocks_;              // per IR node (partitioning)
  std::set<std::string> causal_softmax_;
  std::set<std::string> fixed_dims_;  // dims given one size (--dim NAME=N): static
};

// Rewrites the decomposed forms exporters write into planrt's fused ops (patterns.cpp):
// layer norm, exact GELU, attention, linear + bias. Dead nodes are dropped. `blocks` is
// kept parallel to method.nodes.
// `causal_softmax` names softmax outputs over causally masked scores: their attention is
// made causal, and one that is not recognised as attention is an error.
Status fuse_patterns(ir::Model& model, ir::Method& method, std::vector<std::string>& blocks,
                     bool fused_attention, const std::set<std::string>& causal_softmax);

// Names segments and sets backends for the import's partition (partition.cpp).
Status apply_partition(ir::Method& method, const std::vector<std::string>& blocks,
                       const OnnxImportOptions& options);

}  // namespace planrt::importers::onnx
