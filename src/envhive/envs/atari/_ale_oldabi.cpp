/* ALE's settings and ROM loading for a library built with libstdc++'s old string ABI.
 *
 * ale-py 0.10 and 0.11 (manylinux2014 wheels) were built with _GLIBCXX_USE_CXX11_ABI=0: their
 * ``ALEInterface::setInt``, ``setFloat`` (a ``const std::string &``) and ``loadROM`` (a
 * ``std::filesystem::path``) take the old string and path types. This file is compiled in the
 * old ABI (the macro before any include), so that its std::string and path are those;
 * _ale_newabi.cpp is its twin in the new ABI, and _ale_api.h's ``resolve`` picks the one whose
 * symbols the loaded library exports.
 */
#define _GLIBCXX_USE_CXX11_ABI 0

#include <filesystem>
#include <string>

extern "C" {

int envhive_ale_abi_old(void)
{
#if defined(__GLIBCXX__) && !_GLIBCXX_USE_CXX11_ABI
    return 1;
#else
    return 0;  // not libstdc++, or the old ABI is not available in this toolchain
#endif
}

void envhive_ale_set_int_old(void *fn, void *ale, const char *key, int value)
{
    reinterpret_cast<void (*)(void *, const std::string &, int)>(fn)(ale, std::string(key), value);
}

void envhive_ale_set_float_old(void *fn, void *ale, const char *key, float value)
{
    reinterpret_cast<void (*)(void *, const std::string &, float)>(fn)(ale, std::string(key), value);
}

void envhive_ale_load_rom_old(void *fn, void *ale, const char *path)
{
    reinterpret_cast<void (*)(void *, std::filesystem::path)>(fn)(ale, std::filesystem::path(path));
}

}  // extern "C"
