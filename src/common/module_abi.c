/*
 * module_abi.c - which module ABIs this server loads, and reading a module's
 * pagi_module.abi_version from its file: pagid -t checks it without dlopen,
 * so no constructor of the module runs in a check.
 */
#include "module_abi.h"

#include <elf.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pagi/pagi.h"

const char *module_abi_problem(int v, char *err, size_t errlen)
{
    unsigned major = PAGI_ABI_MAJOR_OF(v), minor = PAGI_ABI_MINOR_OF(v);
    if (v > 0 && major == 0) /* ABI 1 stored a bare major: no minor existed */
        snprintf(err, errlen,
                 "was built against pagi ABI %d.x, this server speaks %d.%d: rebuild against "
                 "the installed pagi.h",
                 v, PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    else if (v <= 0 || major != PAGI_ABI_MAJOR)
        snprintf(err, errlen,
                 "was built against pagi ABI %u.%u, this server speaks %d.%d: rebuild against "
                 "the installed pagi.h",
                 major, minor, PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    else if (minor > PAGI_ABI_MINOR)
        snprintf(err, errlen,
                 "needs pagi ABI %u.%u, this server speaks %d.%d (a minor older than the "
                 "module's): upgrade pagid or build the module against this server's pagi.h",
                 major, minor, PAGI_ABI_MAJOR, PAGI_ABI_MINOR);
    else
        return NULL;
    return err;
}

const char *module_reserved_problem(const void *const reserved[], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reserved[i])
            return MODULE_RESERVED_PROBLEM;
    return NULL;
}

#if UINTPTR_MAX == UINT64_MAX
typedef Elf64_Ehdr ehdr;
typedef Elf64_Shdr shdr;
typedef Elf64_Sym sym;
#define NATIVE_CLASS ELFCLASS64
#else
typedef Elf32_Ehdr ehdr;
typedef Elf32_Shdr shdr;
typedef Elf32_Sym sym;
#define NATIVE_CLASS ELFCLASS32
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_DATA ELFDATA2LSB
#else
#define NATIVE_DATA ELFDATA2MSB
#endif

/* Every offset read from the file is checked against its size, and every
 * struct is copied out (a file offset need not be aligned for it): a
 * truncated or crafted file is "not a valid module", never a bad read. */
static int in_file(size_t size, uint64_t off, uint64_t len)
{
    return off <= size && len <= size - off;
}

static int copy_out(const unsigned char *f, size_t size, uint64_t off, void *out, size_t n)
{
    if (!in_file(size, off, n))
        return -1;
    memcpy(out, f + off, n);
    return 0;
}

/* A string of the table strs (already known to lie in the file) at at,
 * NUL-terminated inside it; else NULL. */
static const char *str_at(const unsigned char *f, const shdr *strs, uint64_t at)
{
    if (at >= strs->sh_size)
        return NULL;
    const char *p = (const char *)f + strs->sh_offset + at;
    return memchr(p, 0, strs->sh_size - at) ? p : NULL;
}

/* 0: the table was read; -1: no such symbol (why says so); -2: not a
 * well-formed native ELF shared object. */
static int find_abi(const unsigned char *f, size_t size, module_table_info *info,
                    const char **why)
{
    ehdr eh;
    *why = "is not a valid module: not an ELF file";
    if (copy_out(f, size, 0, &eh, sizeof eh) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return -2;
    *why = "is not a valid module: an ELF file of another class or byte order than pagid";
    if (eh.e_ident[EI_CLASS] != NATIVE_CLASS || eh.e_ident[EI_DATA] != NATIVE_DATA)
        return -2;
    *why = "is not a valid module: truncated or corrupt ELF file (section headers)";
    if (eh.e_shentsize != sizeof(shdr) || eh.e_shnum == 0 ||
        !in_file(size, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(shdr)))
        return -2;
    int dynsyms = 0;
    for (size_t i = 0; i < eh.e_shnum; i++) {
        shdr sec, strs;
        copy_out(f, size, eh.e_shoff + i * sizeof(shdr), &sec, sizeof sec);
        if (sec.sh_type != SHT_DYNSYM)
            continue;
        *why = "is not a valid module: truncated or corrupt ELF file (dynamic symbols)";
        if (sec.sh_link >= eh.e_shnum || !in_file(size, sec.sh_offset, sec.sh_size) ||
            sec.sh_entsize != sizeof(sym))
            return -2;
        copy_out(f, size, eh.e_shoff + (uint64_t)sec.sh_link * sizeof(shdr), &strs, sizeof strs);
        if (strs.sh_type != SHT_STRTAB || !in_file(size, strs.sh_offset, strs.sh_size))
            return -2;
        dynsyms = 1;
        for (uint64_t k = 0; k < sec.sh_size / sizeof(sym); k++) {
            sym y;
            copy_out(f, size, sec.sh_offset + k * sizeof(sym), &y, sizeof y);
            const char *name = str_at(f, &strs, y.st_name);
            if (y.st_shndx == SHN_UNDEF || !name || strcmp(name, PAGI_MODULE_SYMBOL) != 0)
                continue;
            shdr in;
            *why = "is not a valid module: truncated or corrupt ELF file (the " PAGI_MODULE_SYMBOL
                   " symbol)";
            if (y.st_shndx >= eh.e_shnum)
                return -2;
            copy_out(f, size, eh.e_shoff + (uint64_t)y.st_shndx * sizeof(shdr), &in, sizeof in);
            /* The whole table must lie inside its section, and the section in the file. */
            if (in.sh_type == SHT_NOBITS || y.st_value < in.sh_addr ||
                y.st_value - in.sh_addr > in.sh_size ||
                in.sh_size - (y.st_value - in.sh_addr) < sizeof(pagi_app) ||
                !in_file(size, in.sh_offset, in.sh_size))
                return -2;
            uint64_t off = in.sh_offset + (y.st_value - in.sh_addr);
            copy_out(f, size, off + offsetof(pagi_app, abi_version), &info->abi,
                     sizeof info->abi);
            const unsigned char *r = f + off + offsetof(pagi_app, reserved);
            info->reserved_set = 0;
            for (size_t b = 0; b < sizeof((pagi_app *)0)->reserved; b++)
                info->reserved_set |= r[b] != 0;
            return 0;
        }
    }
    *why = dynsyms ? "does not export '" PAGI_MODULE_SYMBOL "'"
                   : "is not a valid module: no dynamic symbol table (not a shared object)";
    return dynsyms ? -1 : -2;
}

int module_abi_read(const char *path, module_table_info *info, const char **why)
{
    *why = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (st.st_size == 0)
            *why = "is not a valid module: an empty file";
        else
            map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    close(fd);
    if (map == MAP_FAILED)
        return *why ? -2 : -1;
    int rc = find_abi(map, (size_t)st.st_size, info, why);
    munmap(map, (size_t)st.st_size);
    return rc;
}
