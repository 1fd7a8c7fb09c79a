/* ale-py's settings and ROM loading for a library built with libstdc++'s old string ABI.
 *
 * ale-py 0.10 and 0.11 (manylinux2014 wheels) were built with _GLIBCXX_USE_CXX11_ABI=0, so
 * their ``ALEInterface::setInt``, ``setFloat`` (a ``const std::string &``) and ``loadROM`` (a
 * ``std::filesystem::path``) take the old string and path types; ale-py 0.12 takes the new ones.
 * The rest of the API the threaded engine calls has no string in it. This file is compiled in
 * the old ABI (the macro before any include), so that its std::string and path are the ones
 * those symbols expect; _ale_batch.h calls it through these C functions when ``resolve`` found
 * the old-ABI symbols (see _threads.cpp).
 */
#define _GLIBCXX_USE_CXX11_ABI 0

#include <filesystem>
#include <string>

extern "C" {

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
