// Test helper: expects `fn` to throw `Error` whose message contains `needle` (the argument an
// error must name).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace iognn::test {

template <typename Error>
void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace iognn::test
