// ElfSymbols.cpp - reads the .dynsym / .dynstr sections of a 64-bit ELF file (what `nm -D
// --defined-only` prints) without loading it.
#include "ElfSymbols.h"

#include <elf.h>

#include <cstring>
#include <fstream>

namespace npu::opslib {
namespace {

bool ReadAt(std::ifstream& file, uint64_t offset, void* out, size_t size) {
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
  return static_cast<size_t>(file.gcount()) == size;
}

}  // namespace

std::optional<std::vector<std::string>> ExportedFunctions(const std::string& path, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    *error = "cannot be opened";
    return std::nullopt;
  }
  Elf64_Ehdr header{};
  if (!ReadAt(file, 0, &header, sizeof header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    *error = "not an ELF file";
    return std::nullopt;
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_shentsize != sizeof(Elf64_Shdr)) {
    *error = "not a 64-bit little-endian ELF file";
    return std::nullopt;
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  if (sections.empty() ||
      !ReadAt(file, header.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr))) {
    *error = "truncated ELF section table";
    return std::nullopt;
  }
  std::vector<std::string> names;
  for (const Elf64_Shdr& symtab : sections) {
    if (symtab.sh_type != SHT_DYNSYM) continue;
    if (symtab.sh_link >= sections.size() || symtab.sh_entsize != sizeof(Elf64_Sym)) {
      *error = "malformed dynamic symbol table";
      return std::nullopt;
    }
    const Elf64_Shdr& strtab = sections[symtab.sh_link];
    std::vector<Elf64_Sym> symbols(symtab.sh_size / sizeof(Elf64_Sym));
    std::string strings(strtab.sh_size, '\0');
    if (!ReadAt(file, symtab.sh_offset, symbols.data(), symbols.size() * sizeof(Elf64_Sym)) ||
        !ReadAt(file, strtab.sh_offset, strings.data(), strings.size())) {
      *error = "truncated dynamic symbol table";
      return std::nullopt;
    }
    for (const Elf64_Sym& symbol : symbols) {
      const unsigned bind = ELF64_ST_BIND(symbol.st_info);
      if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_shndx == SHN_UNDEF ||
          (bind != STB_GLOBAL && bind != STB_WEAK) ||
          ELF64_ST_VISIBILITY(symbol.st_other) != STV_DEFAULT || symbol.st_name >= strings.size()) {
        continue;
      }
      names.emplace_back(strings.c_str() + symbol.st_name);
    }
  }
  return names;
}

}  // namespace npu::opslib
