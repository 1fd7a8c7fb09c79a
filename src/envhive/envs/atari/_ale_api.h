/* ALE's C++ API as ale-py's extension exports it: the member functions the Atari game calls,
 * looked up by name (dlsym) in the library Python loaded with ``import ale_py``.
 *
 * Nothing of ALE is compiled into envhive: ale-py (GPL-2.0) ships ALE inside its extension,
 * whose dynamic symbols include ``ale::ALEInterface``'s members; they are called as plain
 * functions whose first argument is the object (the Itanium C++ ABI of non-virtual member
 * functions on Linux), on objects built in storage of our own with ALE's exported
 * constructor. What is called through each symbol (argument and return types) is checked
 * against ale-py's own Python binding by the self-check (``_selfcheck.py``), in a subprocess, for
 * each ale-py version and library file before the engine is used.
 *
 * Three calls take a ``std::string`` or a ``std::filesystem::path``, whose layout depends on
 * libstdc++'s string ABI: ale-py 0.12 is built with the new ABI (``__cxx11`` in the symbol
 * names), 0.10 and 0.11 with the old one. Each ABI has its translation unit, compiled with
 * that ABI chosen explicitly (_ale_newabi.cpp, _ale_oldabi.cpp); ``resolve`` picks the one whose
 * symbols the loaded library exports, and refuses a library that has neither, or one whose ABI
 * this build cannot call (a libc++ build of envhive has neither).
 */
#ifndef ENVHIVE_ALE_API_H
#define ENVHIVE_ALE_API_H

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
// _ale_newabi.cpp and _ale_oldabi.cpp: 1 when compiled in that ABI with libstdc++, else 0
// (and the calls below abort nothing: they are never reached then).
int envhive_ale_abi_new(void);
void envhive_ale_set_int_new(void *fn, void *ale, const char *key, int value);
void envhive_ale_set_float_new(void *fn, void *ale, const char *key, float value);
void envhive_ale_load_rom_new(void *fn, void *ale, const char *path);
int envhive_ale_abi_old(void);
void envhive_ale_set_int_old(void *fn, void *ale, const char *key, int value);
void envhive_ale_set_float_old(void *fn, void *ale, const char *key, float value);
void envhive_ale_load_rom_old(void *fn, void *ale, const char *path);
}

namespace envhive_atari {

using Bytes = std::vector<unsigned char>;

// The string-taking calls of one ABI.
struct StringCalls {
    const char *name;  // "new" or "old"
    int (*available)(void);
    void (*set_int)(void *, void *, const char *, int);
    void (*set_float)(void *, void *, const char *, float);
    void (*load_rom)(void *, void *, const char *);
};

const StringCalls kStringCalls[2] = {
    {"new", envhive_ale_abi_new, envhive_ale_set_int_new, envhive_ale_set_float_new, envhive_ale_load_rom_new},
    {"old", envhive_ale_abi_old, envhive_ale_set_int_old, envhive_ale_set_float_old, envhive_ale_load_rom_old},
};

struct Api {
    void (*construct)(void *);
    void (*destroy)(void *);
    int (*act)(void *, int, float);
    bool (*game_over)(const void *, bool);
    int (*lives)(void *);
    void (*gray)(const void *, Bytes &);
    void (*rgb)(const void *, Bytes &);
    // getRAM returns ``const ALERAM &`` (a pointer under the Itanium ABI); ALERAM's one data
    // member is ``byte_t m_ram[128]`` (no base, nothing virtual: ALE's ale_ram.hpp), so the
    // object's address is that of its 128 bytes. The self-check compares them with ale-py's
    // Python getRAM.
    const unsigned char *(*ram)(const void *);
    void (*reset_game)(void *);
    void (*set_mode)(void *, unsigned);
    void (*set_difficulty)(void *, unsigned);
    // ActionVect (std::vector<ale::Action>, an int enum) returned by value.
    std::vector<int> (*minimal_actions)(const void *);
    std::vector<int> (*legal_actions)(const void *);
    // setInt, setFloat, loadROM: the symbols, called through ``calls``.
    void *set_int, *set_float, *load_rom;
    const StringCalls *calls;

    void set_int_value(void *ale, const char *key, int value) const { calls->set_int(set_int, ale, key, value); }
    void set_float_value(void *ale, const char *key, float value) const {
        calls->set_float(set_float, ale, key, value);
    }
    void load(void *ale, const char *path) const { calls->load_rom(load_rom, ale, path); }
};

const struct {
    const char *name;
    size_t offset;
} kSymbols[] = {
    {"_ZN3ale12ALEInterfaceC1Ev", offsetof(Api, construct)},
    {"_ZN3ale12ALEInterfaceD1Ev", offsetof(Api, destroy)},
    {"_ZN3ale12ALEInterface3actENS_6ActionEf", offsetof(Api, act)},
    {"_ZNK3ale12ALEInterface9game_overEb", offsetof(Api, game_over)},
    {"_ZN3ale12ALEInterface5livesEv", offsetof(Api, lives)},
    {"_ZNK3ale12ALEInterface18getScreenGrayscaleERSt6vectorIhSaIhEE", offsetof(Api, gray)},
    {"_ZNK3ale12ALEInterface12getScreenRGBERSt6vectorIhSaIhEE", offsetof(Api, rgb)},
    {"_ZNK3ale12ALEInterface6getRAMEv", offsetof(Api, ram)},
    {"_ZN3ale12ALEInterface10reset_gameEv", offsetof(Api, reset_game)},
    {"_ZN3ale12ALEInterface7setModeEj", offsetof(Api, set_mode)},
    {"_ZN3ale12ALEInterface13setDifficultyEj", offsetof(Api, set_difficulty)},
    {"_ZNK3ale12ALEInterface19getMinimalActionSetEv", offsetof(Api, minimal_actions)},
    {"_ZNK3ale12ALEInterface17getLegalActionSetEv", offsetof(Api, legal_actions)},
};

// setInt, setFloat, loadROM: {new ABI, old ABI} names.
const struct {
    const char *name[2];
    size_t offset;
} kStringSymbols[] = {
    {{"_ZN3ale12ALEInterface6setIntERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEi",
      "_ZN3ale12ALEInterface6setIntERKSsi"},
     offsetof(Api, set_int)},
    {{"_ZN3ale12ALEInterface8setFloatERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEf",
      "_ZN3ale12ALEInterface8setFloatERKSsf"},
     offsetof(Api, set_float)},
    {{"_ZN3ale12ALEInterface7loadROMENSt10filesystem7__cxx114pathE",
      "_ZN3ale12ALEInterface7loadROMENSt10filesystem4pathE"},
     offsetof(Api, load_rom)},
};

// Fill ``api`` from the loaded library ``path``; an error message, or "".
inline std::string resolve(Api *api, const std::string &path) {
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr)
        return "ale-py's library " + path + " is not loaded (import ale_py first)";
    std::string error;
    for (const auto &s : kSymbols) {
        void *f = dlsym(lib, s.name);
        if (f == nullptr) {
            error = std::string("ale-py's library does not export ") + s.name;
            break;
        }
        memcpy(reinterpret_cast<char *>(api) + s.offset, &f, sizeof f);
    }
    api->calls = nullptr;
    for (int abi = 0; error.empty() && abi < 2 && api->calls == nullptr; abi++) {
        bool all = true;
        for (const auto &s : kStringSymbols) {
            void *f = dlsym(lib, s.name[abi]);
            all = all && f != nullptr;
            memcpy(reinterpret_cast<char *>(api) + s.offset, &f, sizeof f);
        }
        if (!all)
            continue;
        if (!kStringCalls[abi].available())
            error = std::string("ale-py's library takes strings in libstdc++'s ") + kStringCalls[abi].name +
                    " ABI, which this build of envhive cannot call";
        else
            api->calls = &kStringCalls[abi];
    }
    if (error.empty() && api->calls == nullptr)
        error = "ale-py's library exports ALEInterface::setInt/setFloat/loadROM in neither libstdc++ string ABI";
    dlclose(lib);  // RTLD_NOLOAD took a reference; Python's import keeps the library
    return error;
}

}  // namespace envhive_atari

#endif /* ENVHIVE_ALE_API_H */
