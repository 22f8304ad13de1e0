// Tensors crossing the Python boundary: inputs from NumPy arrays or any object with
// __dlpack__, outputs as NumPy arrays or as planrt.Tensor objects that export DLPack.
//
// Ownership: an InputHolder keeps what its view points into alive (the caller's array, a
// DLPack tensor it releases when destroyed, or a converted copy it owns), so the view stays
// valid for the run. Outputs take over the Tensor execute() returned: NumPy arrays and
// DLPack consumers read its bytes in place, without a copy (bf16 widens to f32 for NumPy,
// which has no bf16).
// Thread safety: build and destroy holders with the GIL held (a NumPy array's DLPack
// deleter is Python code); their views may be read without it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "planrt/runtime/tensor.h"

struct DLManagedTensor;

namespace planrt::python {

class InputHolder {
 public:
  // `expected`: the dtype the method takes at this position (for the conversions NumPy needs:
  // an f32 array feeds a bf16 input, a list becomes an array of the expected dtype).
  // `what` names the input in errors.
  static InputHolder from_object(pybind11::handle object, std::optional<DType> expected,
                                 const std::string& what);

  InputHolder() = default;
  InputHolder(InputHolder&& other) noexcept;
  InputHolder& operator=(InputHolder&& other) noexcept;
  InputHolder(const InputHolder&) = delete;
  InputHolder& operator=(const InputHolder&) = delete;
  ~InputHolder();

  const TensorView& view() const { return view_; }

 private:
  void release();

  TensorView view_;
  pybind11::object keep_;               // the array view_ points into
  Tensor converted_;                    // f32 rounded to bf16
  DLManagedTensor* managed_ = nullptr;  // a consumed DLPack tensor, released here
};

// planrt.Tensor: an output kept as planrt's own host tensor, exporting DLPack and NumPy.
struct PyTensor {
  std::shared_ptr<const Tensor> tensor;
};

pybind11::object to_numpy(std::shared_ptr<const Tensor> tensor);

void register_tensor(pybind11::module_& m);

}  // namespace planrt::python
