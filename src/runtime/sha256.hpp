// Private SHA-256 (FIPS 180-4) used for the optional .so trust pin.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace aoti_cuda::runtime {

std::array<std::uint8_t, 32> sha256(const std::uint8_t* data, std::size_t size);
/// Lowercase hex of sha256(data).
std::string sha256_hex(const std::uint8_t* data, std::size_t size);

}  // namespace aoti_cuda::runtime
