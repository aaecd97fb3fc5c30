// Writes the fuzz targets' seed inputs: make_seeds <dir> creates
// <dir>/pte/*, <dir>/ptd/* and <dir>/elf/* (run.sh merges them into the kept
// corpus). Seeds are small programs around the tiny ELF (seed_programs.hpp).
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "seed_programs.hpp"
#include "tiny_elf.hpp"

namespace {

void write(const std::string& path, const aoti_cuda_test::Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) {
    std::fprintf(stderr, "make_seeds: cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* sub : {"", "/pte", "/ptd", "/elf"}) ::mkdir((dir + sub).c_str(), 0755);
  for (const auto& [name, bytes] : aoti_cuda_fuzz::pte_seeds()) write(dir + "/pte/" + name, bytes);
  write(dir + "/ptd/external_constant", aoti_cuda_fuzz::ptd_target_program().ptd);
  const aoti_cuda_test::Bytes elf = aoti_cuda_fuzz::tiny_elf();
  write(dir + "/elf/tiny", elf);
  write(dir + "/elf/tiny_headers_only", aoti_cuda_test::Bytes(elf.begin(), elf.begin() + 64));
  return 0;
}
