// Error types thrown by the torch-free core.
//
// The core never calls exit() or abort(): every invalid input is reported by throwing one of these,
// with a message that names the offending argument. The PyTorch binding maps them onto the matching
// Python exception (IndexError, ValueError, NotImplementedError).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

namespace iognn {

// A value is out of its valid range (e.g. a node index >= num_nodes).
struct IndexError : std::out_of_range {
  using std::out_of_range::out_of_range;
};

// An argument has the wrong shape, size or an inconsistent value.
struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A CUDA runtime or library call failed.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
// Message building without iostreams: error paths must not depend on locale state (a host
// toolchain whose libstdc++ differs from the one loaded at run time can crash inside ostream).
inline void append(std::string& s, const std::string& v) { s += v; }
inline void append(std::string& s, const char* v) { s += v; }
inline void append(std::string& s, char v) { s += v; }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void append(std::string& s, T v) {
  s += std::to_string(v);
}

template <typename... Args>
std::string concat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}
}  // namespace detail

}  // namespace iognn

// IOGNN_CHECK(cond, ErrorType, message parts...): throw iognn::ErrorType(message) unless cond holds.
#define IOGNN_CHECK(cond, kind, ...)                                  \
  do {                                                                \
    if (!(cond)) throw ::iognn::kind(::iognn::detail::concat(__VA_ARGS__)); \
  } while (0)
