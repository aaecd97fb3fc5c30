// SHA-256 (FIPS 180-4) for printing the digests of embedded model libraries,
// the values LoadOptions::allowed_so_sha256 pins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aoti_cuda_cli {

/// Lowercase hex SHA-256 of `size` bytes at `data`.
std::string sha256_hex(const std::uint8_t* data, std::size_t size);

}  // namespace aoti_cuda_cli
