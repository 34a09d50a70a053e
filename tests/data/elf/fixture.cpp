// A tiny shared object that needs versioned symbols of glibc and libstdc++ (tests/data/elf/README.md).
#include <condition_variable>
#include <mutex>
#include <string>
#include <cstdio>

static std::mutex m;
static std::condition_variable cv;

extern "C" int fixture_wait(bool (*ready)()) {
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, ready);  // GLIBCXX_3.4.30 with GCC >= 12's libstdc++ (condition_variable::wait)
  return 0;
}

extern "C" unsigned long fixture_len(const char* s) {
  std::string text(s);  // the C++11 string ABI: GLIBCXX_3.4.21
  std::printf("%s\n", text.c_str());
  return text.size();
}
