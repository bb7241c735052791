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

/* Every offset read from the file is checked against its size. */
static int in_file(size_t size, uint64_t off, uint64_t len)
{
    return off <= size && len <= size - off;
}

static int find_abi(const unsigned char *f, size_t size, module_table_info *info)
{
    const ehdr *eh = (const ehdr *)f;
    if (!in_file(size, 0, sizeof *eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != NATIVE_CLASS || eh->e_shentsize != sizeof(shdr) ||
        !in_file(size, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(shdr)))
        return -1;
    const shdr *sh = (const shdr *)(f + eh->e_shoff);
    for (size_t i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum ||
            !in_file(size, sh[i].sh_offset, sh[i].sh_size))
            continue;
        const shdr *strs = &sh[sh[i].sh_link];
        if (!in_file(size, strs->sh_offset, strs->sh_size))
            continue;
        const sym *syms = (const sym *)(f + sh[i].sh_offset);
        const char *names = (const char *)(f + strs->sh_offset);
        size_t n = sh[i].sh_size / sizeof(sym);
        for (size_t k = 0; k < n; k++) {
            size_t at = syms[k].st_name;
            if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_shndx >= eh->e_shnum ||
                at >= strs->sh_size || !memchr(names + at, 0, strs->sh_size - at) ||
                strcmp(names + at, PAGI_MODULE_SYMBOL) != 0)
                continue;
            const shdr *in = &sh[syms[k].st_shndx];
            if (in->sh_type == SHT_NOBITS || syms[k].st_value < in->sh_addr)
                return -1; /* zero-filled: abi_version 0 is refused by the loader anyway */
            uint64_t off = in->sh_offset + (syms[k].st_value - in->sh_addr);
            if (!in_file(size, off, sizeof(pagi_app)))
                return -1;
            memcpy(&info->abi, f + off + offsetof(pagi_app, abi_version), sizeof info->abi);
            const unsigned char *r = f + off + offsetof(pagi_app, reserved);
            info->reserved_set = 0;
            for (size_t b = 0; b < sizeof ((pagi_app *)0)->reserved; b++)
                info->reserved_set |= r[b] != 0;
            return 0;
        }
    }
    return -1;
}

int module_abi_read(const char *path, module_table_info *info)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    int rc = find_abi(map, (size_t)st.st_size, info);
    munmap(map, (size_t)st.st_size);
    return rc;
}
