/* ALE's settings and ROM loading for a library built with libstdc++'s new (C++11) string ABI.
 *
 * ale-py 0.12 is built with _GLIBCXX_USE_CXX11_ABI=1: its ``ALEInterface::setInt``,
 * ``setFloat`` and ``loadROM`` take ``std::__cxx11::basic_string`` and the ``__cxx11``
 * ``std::filesystem::path``. This file chooses that ABI explicitly (the macro before any
 * include) rather than taking whatever the compiler defaults to; _ale_oldabi.cpp is its twin,
 * and _ale_api.h's ``resolve`` picks the one whose symbols the loaded library exports.
 */
#define _GLIBCXX_USE_CXX11_ABI 1

#include <filesystem>
#include <string>

extern "C" {

int envhive_ale_abi_new(void)
{
#if defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
    return 1;
#else
    return 0;  // not libstdc++ (libc++'s strings are neither of the two)
#endif
}

void envhive_ale_set_int_new(void *fn, void *ale, const char *key, int value)
{
    reinterpret_cast<void (*)(void *, const std::string &, int)>(fn)(ale, std::string(key), value);
}

void envhive_ale_set_float_new(void *fn, void *ale, const char *key, float value)
{
    reinterpret_cast<void (*)(void *, const std::string &, float)>(fn)(ale, std::string(key), value);
}

void envhive_ale_load_rom_new(void *fn, void *ale, const char *path)
{
    reinterpret_cast<void (*)(void *, std::filesystem::path)>(fn)(ale, std::filesystem::path(path));
}

}  // extern "C"
