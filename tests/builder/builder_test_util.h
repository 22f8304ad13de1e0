// Helpers shared by the builder tests: models from JSON text, temporary directories, and
// checks that every plan of a built program is valid.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "builder/graph.h"
#include "planning/method_plan.h"
#include "planrt/builder/builder.h"
#include "planrt/format/program_generated.h"

namespace planrt::builder::btest {

// tests/data: $PLANRT_TEST_DATA (set by ctest), else found from this file's path.
inline std::string data_dir() {
  if (const char* env = std::getenv("PLANRT_TEST_DATA")) return env;
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "data").string();
}

inline Result<Model> model_from_json(const std::string& text, const std::string& base_dir = ".") {
  return parse_model_json(text, base_dir);
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    auto base = std::filesystem::temp_directory_path();
    for (int i = 0;; ++i) {
      path_ = base / ("planrt_builder_test_" + std::to_string(::getpid()) + "_" + std::to_string(i));
      if (std::filesystem::create_directory(path_)) break;
    }
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The transformer template at test size: d_model 64, 4 heads, FFN 256, S up to 128.
inline TransformerOptions small(int64_t layers, const std::string& partition = "cpu",
                                const std::string& device = "cuda:0") {
  TransformerOptions o;
  o.layers = layers;
  o.d_model = 64;
  o.heads = 4;
  o.ffn = 256;
  o.max_seq = 128;
  o.weights = "random:7";
  o.partition = partition;
  o.device = device;
  return o;
}

// Runs verify_plan (through verify_method_plan) on every planned buffer of every method.
inline void expect_plans_valid(const fb::ProgramT& program) {
  for (const auto& m : program.methods) {
    Status s = planning::verify_method_plan(*m);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
}

inline const fb::MethodT* find_method(const fb::ProgramT& program, const std::string& name) {
  for (const auto& m : program.methods) {
    if (m->name == name) return m.get();
  }
  return nullptr;
}

inline const fb::ValueT* find_value(const fb::MethodT& method, const std::string& name) {
  for (const auto& v : method.values) {
    if (v->name == name) return v.get();
  }
  return nullptr;
}

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    ::planrt::Status planrt_s_ = (expr);                 \
    ASSERT_TRUE(planrt_s_.ok()) << planrt_s_.to_string(); \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                  \
  auto PLANRT_CONCAT_(tmp_, __LINE__) = (expr);                          \
  ASSERT_TRUE(PLANRT_CONCAT_(tmp_, __LINE__).ok())                       \
      << PLANRT_CONCAT_(tmp_, __LINE__).status().to_string();            \
  lhs = std::move(PLANRT_CONCAT_(tmp_, __LINE__)).value()

// The error's message contains `text`.
#define EXPECT_ERROR_CONTAINS(expr, text)                                          \
  do {                                                                             \
    const auto& planrt_r_ = (expr);                                                     \
    ::planrt::Status planrt_s_ = ::planrt::builder::btest::status_of(planrt_r_); \
    ASSERT_FALSE(planrt_s_.ok()) << "expected an error containing: " << (text);    \
    EXPECT_NE(planrt_s_.message().find(text), std::string::npos)                   \
        << "message: " << planrt_s_.message() << "\nexpected to contain: " << (text); \
  } while (0)

inline Status status_of(const Status& s) { return s; }
template <typename T>
Status status_of(const Result<T>& r) { return r.status(); }

}  // namespace planrt::builder::btest
