// Container headers of .pte and .ptd files (P1-P7, D1-D2) and segment bounds
// (S7), in overflow-checked u64 arithmetic. See reader.hpp.
#include <cstdio>
#include <cstring>

#include "format/reader.hpp"

namespace aoti_cuda::format {

void invalid(const std::string& file, const std::string& check, const std::string& detail) {
  throw Error(ErrorCode::kInvalidProgram, file + ": " + check + " failed: " + detail + " (see docs/format-checks.md)");
}

std::string printable(const std::uint8_t* p, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string quoted(std::string_view s) {
  return "\"" + printable(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()) + "\"";
}

/// Makes fd.fb point at a 16-byte aligned copy of [0, size) when needed (P7 / D3).
void ensure_aligned(FileData& fd, std::uint64_t size) {
  const auto addr = reinterpret_cast<std::uintptr_t>(fd.bytes.data);
  fd.fb_size = static_cast<std::size_t>(size);
  if (addr % 16 == 0) {
    fd.fb = fd.bytes.data;
    return;
  }
  constexpr std::size_t kAlign = 64;
  fd.aligned_storage.reset(new std::uint8_t[fd.fb_size + kAlign]);
  std::uint8_t* raw = fd.aligned_storage.get();
  std::uint8_t* aligned =
      raw + ((kAlign - reinterpret_cast<std::uintptr_t>(raw) % kAlign) % kAlign);
  std::memcpy(aligned, fd.bytes.data, fd.fb_size);
  fd.fb = aligned;
}

flatbuffers::Verifier::Options verifier_options() {
  flatbuffers::Verifier::Options o;
  o.max_depth = 64;
  o.max_tables = 1000000;
  o.check_alignment = true;
  o.check_nested_flatbuffers = true;
  return o;
}

/// Bytes of a segment: [base + offset, + size), checked against the segment
/// area (S7 / D5). `what` names the referring field for the message.
ByteView segment_bytes(const FileData& fd, std::uint64_t offset, std::uint64_t size, const std::string& what) {
  if (size == 0) return ByteView{fd.bytes.data, 0};
  if (!fd.has_segment_area) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " refers to " + u64s(size) + " bytes of segment data but the file has no segment area "
                   "(no extended header / segment_base_offset 0)");
  }
  std::uint64_t rel_end = 0;
  if (!format::add_u64(offset, size, &rel_end)) {
    invalid(fd.label, "S7 (segment bounds)", what + " offset " + u64s(offset) + " + size " + u64s(size) + " overflows");
  }
  if (fd.segment_size_known && rel_end > fd.segment_data_size) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " ends at relative offset " + u64s(rel_end) + " past segment_data_size " +
                u64s(fd.segment_data_size));
  }
  std::uint64_t abs_start = 0, abs_end = 0;
  if (!format::add_u64(fd.segment_base, offset, &abs_start) || !format::add_u64(abs_start, size, &abs_end) ||
      abs_end > fd.bytes.size) {
    invalid(fd.label, "S7 (segment bounds)",
            what + " [base " + u64s(fd.segment_base) + " + offset " + u64s(offset) + ", size " + u64s(size) +
                "] lies past the end of the " + u64s(fd.bytes.size) + "-byte file");
  }
  return ByteView{fd.bytes.data + abs_start, static_cast<std::size_t>(size)};
}

/// P1-P7 (+ the size limit of P8) for a .pte; leaves fd.fb set up.
// P5 / D2: the segment area [base, base + data_size) follows the flatbuffer
// (which ends at fb_end) and lies inside the file; records it in fd. The
// header fields are at base_field and base_field + 8.
void set_segment_area(FileData& fd, const char* check, std::uint64_t base, std::uint64_t data_size,
                      std::uint64_t fb_end, int base_field) {
  const std::uint64_t F = fd.bytes.size;
  const std::string size_field = "segment_data_size at offset " + std::to_string(base_field + 8);
  if (base < fb_end) {
    invalid(fd.label, check, "segment_base_offset " + u64s(base) + " at offset " + std::to_string(base_field) +
                                 " overlaps the flatbuffer (ends at " + u64s(fb_end) + ")");
  }
  std::uint64_t end = 0;
  if (!format::add_u64(base, data_size, &end)) {
    invalid(fd.label, check,
            "segment_base_offset " + u64s(base) + " + segment_data_size " + u64s(data_size) + " (" + size_field + ") overflows");
  }
  if (end > F) {
    invalid(fd.label, check, "segment data [" + u64s(base) + ", " + u64s(end) + ") (" + size_field +
                                 ") is past the end of the " + u64s(F) + "-byte file (truncated file?)");
  }
  fd.has_segment_area = true;
  fd.segment_base = base;
  fd.segment_size_known = true;
  fd.segment_data_size = data_size;
}

// P4/P5: the extended header "eh00" at offset 8 (header_length, program_size,
// segment_base_offset, segment_data_size); returns program_size.
std::uint64_t parse_pte_extended_header(FileData& fd) {
  const std::uint8_t* d = fd.bytes.data;
  const std::uint64_t F = fd.bytes.size;
  std::uint64_t program_size = F;
  const std::uint64_t hlen = format::read_u32(d + 12);
  program_size = format::read_u64(d + 16);
  const std::uint64_t base = format::read_u64(d + 24);
  const std::uint64_t data_size = hlen >= 32 ? format::read_u64(d + 32) : 0;
  if (hlen < 24) invalid(fd.label, "P4 (extended header)", "header_length " + u64s(hlen) + " at offset 12 is < 24");
  if (hlen < 32) {
    invalid(fd.label, "P4 (extended header)",
            "header_length " + u64s(hlen) + " at offset 12 is between 24 and 32 (malformed)");
  }
  if (8 + hlen > program_size) {
    invalid(fd.label, "P4 (extended header)",
            "program_size " + u64s(program_size) + " at offset 16 is smaller than the header (8 + " + u64s(hlen) + ")");
  }
  if (program_size > F) {
    invalid(fd.label, "P4 (extended header)",
            "program_size " + u64s(program_size) + " at offset 16 is past the end of the " + u64s(F) +
                "-byte file (truncated file?)");
  }
  if (program_size >= kFlatbufferMaxSize) {
    invalid(fd.label, "P4 (extended header)", "program_size " + u64s(program_size) + " exceeds the 2^31-1 flatbuffer limit");
  }
  if (base != 0) {
    set_segment_area(fd, "P5 (segment base)", base, data_size, program_size, 24);
  } else if (data_size != 0) {
    invalid(fd.label, "P5 (segment base)",
            "segment_data_size " + u64s(data_size) + " at offset 32 is non-zero but segment_base_offset is 0");
  }
  fd.header_end = 8 + hlen;
  return program_size;
}

void parse_pte_header(FileData& fd) {
  const std::uint8_t* d = fd.bytes.data;
  const std::uint64_t F = fd.bytes.size;
  if (F < kHeadBytes) {
    invalid(fd.label, "P1 (minimum size)",
            "file is " + u64s(F) + " bytes; a .pte needs at least 64 (empty or truncated file?)");
  }
  if (std::memcmp(d + 4, "ET12", 4) != 0) {
    if (d[4] == 'E' && d[5] == 'T') {
      invalid(fd.label, "P2 (file identifier)",
              "identifier \"" + printable(d + 4, 4) + "\" at offset 4 is an incompatible program version "
              "(this reader supports \"ET12\")");
    }
    invalid(fd.label, "P2 (file identifier)",
            "bytes 4..7 are \"" + printable(d + 4, 4) + "\", not \"ET12\": not an ExecuTorch program");
  }
  std::uint64_t program_size = F;
  const bool has_header = std::memcmp(d + 8, "eh00", 4) == 0;
  if (!has_header && d[8] == 'e' && d[9] == 'h') {
    invalid(fd.label, "P3 (extended header version)",
            "extended header magic \"" + printable(d + 8, 4) + "\" at offset 8 is not the supported \"eh00\"");
  }
  if (has_header) {
    program_size = parse_pte_extended_header(fd);
  } else if (F >= kFlatbufferMaxSize) {
    invalid(fd.label, "P6 (size)", "file of " + u64s(F) + " bytes exceeds the 2^31-1 flatbuffer limit");
  }
  ensure_aligned(fd, program_size);
  const std::uint64_t root = format::read_u32(d);
  if (root < fd.header_end || root + 4 > program_size) {
    invalid(fd.label, "P9 (root offset)",
            "root table offset " + u64s(root) + " at offset 0 points " +
                (root < fd.header_end ? "into the file header" : "past the flatbuffer") + " (valid: " +
                u64s(fd.header_end) + ".." + u64s(program_size - 4) + ")");
  }
}

/// D1-D2 for a .ptd; leaves fd.fb set up.
void parse_ptd_header(FileData& fd) {
  const std::uint8_t* d = fd.bytes.data;
  const std::uint64_t F = fd.bytes.size;
  if (F < kHeadBytes) {
    invalid(fd.label, "D1 (minimum size)", "file is " + u64s(F) + " bytes; a .ptd needs at least 64 (empty or truncated file?)");
  }
  if (std::memcmp(d + 4, "FT01", 4) != 0) {
    invalid(fd.label, "D1 (file identifier)",
            "bytes 4..7 are \"" + printable(d + 4, 4) + "\", not \"FT01\": not an ExecuTorch data (.ptd) file");
  }
  if (std::memcmp(d + 8, "FH01", 4) != 0) {
    invalid(fd.label, "D1 (header magic)", "magic \"" + printable(d + 8, 4) + "\" at offset 8 is not \"FH01\"");
  }
  const std::uint64_t hlen = format::read_u32(d + 12);
  const std::uint64_t fb_off = format::read_u64(d + 16);
  const std::uint64_t fb_size = format::read_u64(d + 24);
  const std::uint64_t base = format::read_u64(d + 32);
  const std::uint64_t data_size = format::read_u64(d + 40);
  if (hlen < 40) invalid(fd.label, "D1 (header length)", "header_length " + u64s(hlen) + " at offset 12 is < 40");
  if (fb_off < hlen) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer_offset " + u64s(fb_off) + " at offset 16 is smaller than header_length " + u64s(hlen));
  }
  std::uint64_t fb_end = 0;
  if (!format::add_u64(fb_off, fb_size, &fb_end)) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer_offset " + u64s(fb_off) + " + flatbuffer_size " + u64s(fb_size) + " (offset 24) overflows");
  }
  if (fb_end > F) {
    invalid(fd.label, "D2 (header extents)",
            "flatbuffer end " + u64s(fb_end) + " (flatbuffer_size at offset 24) is past the end of the " + u64s(F) +
                "-byte file (truncated file?)");
  }
  if (fb_end >= kFlatbufferMaxSize) {
    invalid(fd.label, "D2 (header extents)", "flatbuffer of " + u64s(fb_end) + " bytes exceeds the 2^31-1 limit");
  }
  // A .ptd always has a segment area (possibly empty at offset 0).
  if (base != 0 || data_size != 0) {
    set_segment_area(fd, "D2 (header extents)", base, data_size, fb_end, 32);
  } else {
    fd.has_segment_area = true;
    fd.segment_base = 0;
    fd.segment_size_known = true;
    fd.segment_data_size = 0;
  }
  fd.header_end = 8 + fb_off;
  ensure_aligned(fd, fb_end);
  const std::uint64_t root = format::read_u32(d);
  if (root < fd.header_end || root + 4 > fb_end) {
    invalid(fd.label, "D4 (root offset)",
            "root table offset " + u64s(root) + " at offset 0 points " +
                (root < fd.header_end ? "into the file header" : "past the flatbuffer") + " (valid: " +
                u64s(fd.header_end) + ".." + u64s(fb_end - 4) + ")");
  }
}

}  // namespace aoti_cuda::format
