// The importer's tensors: an ONNX element type, a static shape and the bytes, which are
// either borrowed (an initializer's raw_data inside the parsed model, a mapping of an
// external-data file) or owned (a folded value, an initializer stored in typed fields).
//
// TensorProto decoding (read_tensor) checks everything an untrusted file can get wrong:
// an unknown or unsupported element type, negative dims, element counts that overflow,
// bytes that disagree with the shape, external data outside the model's folder or past the
// end of its file. Errors name the tensor. Pure functions over their arguments.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "planrt/core/dtype.h"
#include "planrt/core/result.h"

namespace onnx {
class TensorProto;
}

namespace planrt::importers::onnx {

// ONNX TensorProto.DataType values the importer knows by name.
enum class Elem : int32_t {
  Undefined = 0, Float = 1, Uint8 = 2, Int8 = 3, Uint16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  String = 8, Bool = 9, Float16 = 10, Double = 11, Uint32 = 12, Uint64 = 13, Complex64 = 14,
  Complex128 = 15, Bfloat16 = 16,
};
std::string elem_name(Elem elem);          // "float", "int64", ... ("type 99" if unknown)
size_t elem_size(Elem elem);               // 0 for string, complex and unknown types
bool elem_is_integer(Elem elem);           // signed or unsigned integers and bool
bool elem_is_float(Elem elem);             // float, double, float16, bfloat16
// The planrt dtype that holds the element type, or NotSupported naming it.
Result<DType> to_dtype(Elem elem);
Elem from_dtype(DType dtype);

struct Tensor {
  Elem elem = Elem::Float;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;  // keeps `bytes` alive

  int64_t numel() const;
  // Every element widened: integers and bool exactly, floats as double.
  std::vector<int64_t> to_i64() const;
  std::vector<double> to_f64() const;
  // A tensor owning `values` converted to `elem` (floats round to nearest, integers wrap
  // as a C++ cast does).
  static Tensor from_i64(Elem elem, std::vector<int64_t> shape, const std::vector<int64_t>& values);
  static Tensor from_f64(Elem elem, std::vector<int64_t> shape, const std::vector<double>& values);
  static Tensor owning(Elem elem, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
};

// How a TensorProto's external data is found and checked. Each external file is mapped
// once per context and shared by every tensor read from it (one import: one context).
struct ExternalDataContext {
  std::filesystem::path model_dir;  // the folder of the .onnx file; every location lies in it
  mutable std::map<std::string, std::shared_ptr<const void>> mapped;  // path -> its mapping
};

// Decodes an initializer or a Constant's tensor. `owner` keeps the TensorProto alive when
// the returned bytes borrow its raw_data.
Result<Tensor> read_tensor(const ::onnx::TensorProto& proto, const ExternalDataContext& context,
                           std::shared_ptr<const void> owner);

// A TensorProto serialized on its own (the .pb files of ONNX's tests, `--input-value`).
Result<Tensor> read_tensor_file(const std::string& path);

}  // namespace planrt::importers::onnx
