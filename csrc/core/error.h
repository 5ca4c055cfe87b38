// Error types thrown by the torch-free core.
//
// The core never calls exit() or abort(): every invalid input is reported by throwing one of these,
// with a message that names the offending argument. The PyTorch binding maps them onto the matching
// Python exception (IndexError, ValueError, NotImplementedError).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

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
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace iognn

// IOGNN_CHECK(cond, ErrorType, message parts...): throw iognn::ErrorType(message) unless cond holds.
#define IOGNN_CHECK(cond, kind, ...)                                  \
  do {                                                                \
    if (!(cond)) throw ::iognn::kind(::iognn::detail::concat(__VA_ARGS__)); \
  } while (0)
