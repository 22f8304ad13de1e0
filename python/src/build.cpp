#include "build.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "errors.h"
#include "planrt/builder/builder.h"
#include "planrt/importers/onnx.h"

namespace py = pybind11;

namespace planrt::python {
namespace {

struct PyBuiltProgram {
  std::shared_ptr<builder::BuiltProgram> program;
};

struct BuildArgs {
  std::optional<std::string> model;
  std::optional<std::string> onnx_bytes;  // an ONNX model given as bytes or an onnx.ModelProto
  std::optional<std::string> template_name;
  py::object dims, input_values, ffn;
  std::string partition, dtype, attention, weights, method;
  std::optional<std::string> device;
  bool shared_scratch = false, external_weights = false, no_reuse = false;
  std::string engine_scratch, cuda_scratch, conv_layout;
  int64_t layers = 0, d_model = 0, heads = 0, max_seq = 0;
};

// A Python int that fits int64 (bool is not taken for a number); `what` names the argument.
int64_t int64_arg(py::handle value, const std::string& what) {
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value)) {
    fail(ErrorCode::InvalidArgument,
         fmt::format("{} must be an int, not {}", what, py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) fail(ErrorCode::InvalidArgument, fmt::format("{} = {} does not fit in 64 bits", what, py::str(value).cast<std::string>()));
  return v;
}

// A str argument; `what` names it.
std::string str_arg(py::handle value, const std::string& what) {
  if (!py::isinstance<py::str>(value)) {
    fail(ErrorCode::InvalidArgument,
         fmt::format("{} must be a str, not {}", what, py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
  }
  return value.cast<std::string>();
}

importers::OnnxDimBound dim_bound(const std::string& name, py::handle value) {
  importers::OnnxDimBound b;
  const std::string what = fmt::format("dims['{}']", name);
  if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    b.min = b.max = int64_arg(value, what);
  } else if ((py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) && py::len(value) == 2) {
    py::sequence s = py::reinterpret_borrow<py::sequence>(value);
    b.min = int64_arg(s[0], what + " MIN");
    b.max = int64_arg(s[1], what + " MAX");
  } else {
    fail(ErrorCode::InvalidArgument,
         fmt::format("dims['{}'] must be N or (MIN, MAX)", name));
  }
  if (b.min < 1 || b.max < b.min) {
    fail(ErrorCode::InvalidArgument,
         fmt::format("dims['{}'] = ({}, {}): the bounds need 1 <= MIN <= MAX", name, b.min, b.max));
  }
  return b;
}

std::string fspath(py::handle path) {
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

builder::Model transformer(const BuildArgs& a) {
  builder::TransformerOptions t;
  t.layers = a.layers;
  t.d_model = a.d_model;
  t.heads = a.heads;
  t.max_seq = a.max_seq;
  if (py::isinstance<py::int_>(a.ffn)) {
    t.ffn = int64_arg(a.ffn, "ffn");
  } else if (py::isinstance<py::list>(a.ffn) || py::isinstance<py::tuple>(a.ffn)) {
    for (py::handle w : a.ffn) t.ffn_per_block.push_back(int64_arg(w, "each ffn width"));
  } else {
    fail(ErrorCode::InvalidArgument, "ffn must be an int or a list of ints (one per block)");
  }
  t.weights = a.weights;
  t.partition = a.partition;
  t.fused_attention = a.attention == "fused";
  t.dtype = unwrap(parse_dtype(a.dtype));
  if (a.device) t.device = *a.device;
  check(builder::check_transformer_options(t));
  py::gil_scoped_release release;
  return unwrap(builder::make_transformer(t));
}

builder::Model onnx(const BuildArgs& a) {
  importers::OnnxImportOptions o;
  if (!a.dims.is_none()) {
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(a.dims)) {
      const std::string name = py::str(k).cast<std::string>();
      o.dims[name] = dim_bound(name, v);
    }
  }
  if (!a.input_values.is_none()) {
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(a.input_values)) {
      o.input_values[py::str(k).cast<std::string>()] = fspath(v);
    }
  }
  o.partition = a.partition;
  if (a.device) o.device = *a.device;
  o.fused_attention = a.attention == "fused";
  o.method = a.method;
  o.spelling = importers::OnnxImportOptions::Spelling::Python;
  if (a.dtype != "f32") {
    fail(ErrorCode::InvalidArgument, "dtype applies to template=; an ONNX model keeps its own types");
  }
  py::gil_scoped_release release;
  if (a.onnx_bytes) {
    // External data, if any, is looked up beside the current directory's files.
    const auto* data = reinterpret_cast<const uint8_t*>(a.onnx_bytes->data());
    return unwrap(importers::parse_model_onnx(std::span<const uint8_t>(data, a.onnx_bytes->size()), ".", o));
  }
  return unwrap(importers::read_model_onnx(*a.model, o));
}

builder::Model json(const BuildArgs& a) {
  if (!a.dims.is_none() || !a.input_values.is_none()) {
    fail(ErrorCode::InvalidArgument, "dims and input_values apply to an ONNX model; a model JSON "
                                     "declares its dims (docs/model-format.md)");
  }
  if (a.device) {
    fail(ErrorCode::InvalidArgument, "device applies to template= and ONNX models; a model JSON "
                                     "gives \"device\" per method or node (docs/model-format.md)");
  }
  py::gil_scoped_release release;
  return unwrap(builder::read_model_json(*a.model));
}

PyBuiltProgram build(py::object model, py::object template_name, py::object dims,
                     py::object input_values, const std::string& partition, py::object device,
                     const std::string& dtype, const std::string& attention, bool shared_scratch,
                     bool external_weights, bool no_reuse, int64_t layers, int64_t d_model,
                     int64_t heads, py::object ffn, int64_t max_seq, const std::string& weights,
                     const std::string& method, double plan_time_budget_ms,
                     const std::string& engine_scratch, const std::string& cuda_scratch,
                     const std::string& conv_layout) {
  BuildArgs a;
  if (py::isinstance<py::bytes>(model) || py::isinstance<py::bytearray>(model) ||
      py::isinstance<py::memoryview>(model)) {
    a.onnx_bytes = py::module_::import("builtins").attr("bytes")(model).cast<std::string>();  // ONNX bytes
    a.model = "<bytes>";
  } else if (!model.is_none() && py::hasattr(model, "SerializeToString") && !py::isinstance<py::str>(model)) {
    a.onnx_bytes = model.attr("SerializeToString")().cast<std::string>();  // an onnx.ModelProto
    a.model = "<onnx.ModelProto>";
  } else if (!model.is_none()) {
    if (!py::isinstance<py::str>(model) && !py::hasattr(model, "__fspath__")) {
      fail(ErrorCode::InvalidArgument,
           fmt::format("model must be a path (str or os.PathLike), ONNX bytes or an onnx.ModelProto, not {}",
                       py::str(py::type::of(model).attr("__name__")).cast<std::string>()));
    }
    a.model = fspath(model);
  }
  if (!template_name.is_none()) a.template_name = template_name.cast<std::string>();
  if (a.model.has_value() == a.template_name.has_value()) {
    fail(ErrorCode::InvalidArgument, "give either a model file (.json or .onnx) or template=, not both or neither");
  }
  if (attention != "fused" && attention != "unfused") {
    fail(ErrorCode::InvalidArgument, fmt::format("attention='{}': expected 'fused' or 'unfused'", attention));
  }
  for (py::handle d : {dims, input_values}) {
    if (!d.is_none() && !py::isinstance<py::dict>(d)) {
      fail(ErrorCode::InvalidArgument, "dims and input_values are dicts keyed by name");
    }
  }
  a.dims = dims;
  a.input_values = input_values;
  a.ffn = ffn;
  a.partition = partition;
  a.dtype = dtype;
  a.attention = attention;
  a.weights = weights;
  a.method = method;
  if (!device.is_none()) a.device = str_arg(device, "device");
  a.shared_scratch = shared_scratch;
  if (engine_scratch != "" && engine_scratch != "private" && engine_scratch != "pooled" &&
      engine_scratch != "planned") {
    fail(ErrorCode::InvalidArgument,
         fmt::format("engine_scratch='{}': expected 'private', 'pooled' or 'planned'", engine_scratch));
  }
  if (cuda_scratch != "planned" && cuda_scratch != "pool") {
    fail(ErrorCode::InvalidArgument, fmt::format("cuda_scratch='{}': expected 'planned' or 'pool'", cuda_scratch));
  }
  if (shared_scratch && engine_scratch != "" && engine_scratch != "pooled") {
    fail(ErrorCode::InvalidArgument,
         fmt::format("shared_scratch=True and engine_scratch='{}' disagree", engine_scratch));
  }
  a.engine_scratch = engine_scratch;
  a.cuda_scratch = cuda_scratch;
  if (conv_layout != "nhwc" && conv_layout != "nchw") {
    fail(ErrorCode::InvalidArgument, fmt::format("conv_layout='{}': expected 'nhwc' or 'nchw'", conv_layout));
  }
  a.conv_layout = conv_layout;
  a.external_weights = external_weights;
  a.no_reuse = no_reuse;
  a.layers = layers;
  a.d_model = d_model;
  a.heads = heads;
  a.max_seq = max_seq;

  std::optional<builder::Model> built_model;
  if (a.template_name) {
    if (*a.template_name != "transformer") {
      fail(ErrorCode::InvalidArgument,
           fmt::format("unknown template '{}' (available: transformer)", *a.template_name));
    }
    if (!dims.is_none() || !input_values.is_none()) {
      fail(ErrorCode::InvalidArgument, "dims and input_values apply to an ONNX model; the template "
                                       "takes max_seq");
    }
    built_model.emplace(transformer(a));
  } else if (a.onnx_bytes || a.model->ends_with(".onnx")) {
    built_model.emplace(onnx(a));
  } else {
    built_model.emplace(json(a));
  }
  builder::BuildOptions options;
  options.no_reuse = a.no_reuse;
  options.external_weights = a.external_weights;
  options.shared_scratch = a.shared_scratch || a.engine_scratch == "pooled";
  options.plan_engine_scratch = a.engine_scratch == "planned";
  options.plan_cuda_scratch = a.cuda_scratch == "planned";
  options.channels_last = a.conv_layout == "nhwc";
  options.producer = "planrt-python";
  if (plan_time_budget_ms < 0) fail(ErrorCode::InvalidArgument, "plan_time_budget_ms must be >= 0");
  options.plan_time_budget_ms = plan_time_budget_ms;
  Result<builder::BuiltProgram> program = Status(ErrorCode::Internal, "not built");
  {
    py::gil_scoped_release release;
    program = builder::build_program(*built_model, options);
  }
  return {std::make_shared<builder::BuiltProgram>(unwrap(std::move(program)))};
}

}  // namespace

void register_build(py::module_& m) {
  py::class_<PyBuiltProgram>(m, "BuiltProgram", R"doc(
A program built in memory by ``planrt.build``: save it (``save``), take its bytes
(``to_bytes``) or pass it to ``planrt.Module`` to load it directly.)doc")
      .def("save", [](const PyBuiltProgram& p, py::object path) {
        const std::string where = fspath(path);
        py::gil_scoped_release release;
        check(p.program->write(where));
      }, py::arg("path"),
           "Writes the .prog file (and, with external_weights, '<stem>.safetensors' beside it).")
      .def("to_bytes", [](const PyBuiltProgram& p) {
        std::vector<uint8_t> bytes;
        {
          py::gil_scoped_release release;
          bytes = unwrap(p.program->serialize());
        }
        return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      }, "The .prog file's bytes (embedded weights only: external weights need save()).")
      .def_property_readonly("num_constants", [](const PyBuiltProgram& p) { return p.program->num_constants(); })
      .def_property_readonly("constants_bytes", [](const PyBuiltProgram& p) { return p.program->constants_bytes(); })
      .def_property_readonly("plans", [](const PyBuiltProgram& p) {
        py::list out;
        for (const builder::PlanSummary& s : p.program->plans()) {
          py::dict d;
          d["method"] = s.method;
          d["device"] = to_string(s.device);
          d["planner"] = s.planner;
          d["lower_bound_bytes"] = s.lower_bound_bytes;
          d["planned_bytes"] = s.planned_bytes;
          d["num_tensors"] = s.num_tensors;
          d["ratio"] = s.ratio();
          out.append(d);
        }
        return out;
      }, "The memory plan of each (method, device): planned bytes, lower bound, ratio.");

  m.def("build", &build, py::arg("model") = py::none(), py::kw_only(), py::arg("template") = py::none(),
        py::arg("dims") = py::none(), py::arg("input_values") = py::none(),
        py::arg("partition") = "cpu", py::arg("device") = py::none(), py::arg("dtype") = "f32",
        py::arg("attention") = "fused", py::arg("shared_scratch") = false,
        py::arg("external_weights") = false, py::arg("no_reuse") = false, py::arg("layers") = 2,
        py::arg("d_model") = 512, py::arg("heads") = 8, py::arg("ffn") = 2048,
        py::arg("max_seq") = 2048, py::arg("weights") = "random:0", py::arg("method") = "forward",
        py::arg("plan_time_budget_ms") = 500.0, py::arg("engine_scratch") = "",
        py::arg("cuda_scratch") = "planned", py::arg("conv_layout") = "nhwc",
        R"doc(
Builds a program, as ``planrt build`` does (docs/cli.md), and returns a BuiltProgram.

``model``: a model JSON (docs/model-format.md) or an ONNX file (docs/onnx.md), by path, or an
ONNX model as bytes or an ``onnx.ModelProto`` (external data is then read relative to the
current directory); or
``template="transformer"`` with ``layers``, ``d_model``, ``heads``, ``ffn`` (one width or one
per block), ``max_seq``, ``weights`` ("random:SEED" or a .safetensors path) and ``dtype``
("f32" or "bf16").

ONNX only: ``dims`` bounds the model's named dims, ``{"S": (1, 128)}`` or ``{"S": 64}`` (a
fixed size); ``input_values`` fixes inputs at build time, ``{"shape": "shape.pb"}``; ``method``
names the program's method. Template and ONNX: ``partition`` ("cpu", "cuda",
"cuda-per-block", "cuda-per-op", "engine", "engine-per-block"), ``device`` ("cpu", "cuda:N")
and ``attention`` ("fused" or "unfused"). Every model: ``shared_scratch`` (engines draw from the
per-device pool), ``external_weights`` (weights in a .safetensors file beside the program),
``no_reuse`` (the no-reuse planner, for debugging), ``plan_time_budget_ms`` (the planner's search
after the greedy, per planned buffer above its lower bound; 0: none), ``engine_scratch``
("private", "pooled" or "planned": a value of the method's arena, live only while the engine
runs; "" follows ``shared_scratch``) and ``cuda_scratch`` ("planned", the default: cuda segments'
intermediates in the method's arena; "pool": from the warm pool per call) and ``conv_layout``
("nhwc", the default: convolution regions channels-last inside; "nchw": as the model wrote
them).)doc");
}

}  // namespace planrt::python
