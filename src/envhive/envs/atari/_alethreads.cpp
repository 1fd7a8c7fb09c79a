/* envhive.envs.atari._alethreads: a batch of Atari games stepped by C++ threads, GIL released.
 *
 * The game is _ale_game.h (one ALE game with EnvPool's preprocessing, called through ale-py's
 * exported C++ API: _ale_api.h, _ale_newabi.cpp, _ale_oldabi.cpp); the threads, the op rule
 * and the Python type are envhive's threaded batch core (envhive/threaded_batch.h,
 * envhive/batch_module.h). The Python side is _engine.py.
 */
#include "envhive/batch_module.h"

#include "_ale_game.h"

ENVHIVE_BATCH_MODULE(_alethreads, "envhive.envs.atari._alethreads", envhive_atari::Atari)
