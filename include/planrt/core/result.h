// Result<T>: a value or the Status saying why there is none.
//
// Accessing value() of an error Result is a broken invariant in the caller and aborts
// with the status printed; library code always checks ok() (or uses PLANRT_ASSIGN_OR_RETURN)
// first. Move-only T is supported.
//
// Thread safety: a Result is a value like the T it holds: several threads may read one
// object at once (ok(), status(), const value()); moving from it or assigning to it must not
// race with any other access to that object.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>

#include "planrt/core/status.h"

namespace planrt {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) {
      v_ = Status(ErrorCode::Internal, "Result constructed from an ok Status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { check(); return std::get<T>(v_); }
  const T& value() const& { check(); return std::get<T>(v_); }
  T&& value() && { check(); return std::get<T>(std::move(v_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!ok()) {
      std::fprintf(stderr, "planrt: value() of an error Result: %s\n",
                   std::get<Status>(v_).to_string().c_str());
      std::abort();
    }
  }
  std::variant<T, Status> v_;
};

}  // namespace planrt

#define PLANRT_CONCAT_INNER_(a, b) a##b
#define PLANRT_CONCAT_(a, b) PLANRT_CONCAT_INNER_(a, b)

// PLANRT_ASSIGN_OR_RETURN(auto x, make_x()); returns the Status on error.
#define PLANRT_ASSIGN_OR_RETURN(lhs, expr) \
  PLANRT_ASSIGN_OR_RETURN_IMPL_(PLANRT_CONCAT_(planrt_result_, __LINE__), lhs, expr)
#define PLANRT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
