// Work units of the cpu indexer scores (ops/indexer_scores.h): the step's tokens grouped by the key list
// they score (their request's row of the block tables), and each list's keys cut into tiles. A unit is (list, key tile) over all the list's tokens, so each key is loaded and converted
// from its storage format once per step, however many tokens of its request a step scores (a prefill
// chunk, or one decode token), and a single decode token still splits into many units for the threads.
//
// Threads claim units in increasing order (an atomic counter): each one's list only moves forward, and
// a token's key tiles reach a thread in ascending key order, as the streaming top-k (fused_topk.h)
// requires.
#pragma once

#include <cstdint>

namespace sieve::cpu {

struct KeyTileUnitsPlan {
    int64_t n_tokens = 0, n_lists = 0;
    // byte offsets from the plan's base (64-aligned): tokens grouped by list [n_tokens] i32, list offsets
    // [n_lists + 1] i32, unit offsets [n_lists + 1] i64, keys of each list (max n_keys of its tokens)
    // [n_lists] i32
    int64_t tokens = 0, list_off = 0, unit_off = 0, list_keys = 0;
    int64_t bytes = 0;  // workspace the plan needs
};
KeyTileUnitsPlan key_tile_units_plan(int64_t n_tokens, int64_t n_lists);

struct KeyTileUnit {
    int64_t list = 0;
    int64_t k0 = 0, k1 = 0;           // the tile's keys [k0, k1), k1 ≤ the list's keys
    const int32_t* tokens = nullptr;  // the list's tokens, ascending
    int64_t n_tokens = 0;
};

class KeyTileUnits {
public:
    // Groups tokens [0, n_tokens) by token_list[t] ∈ [0, n_lists) (stable) and cuts each list's keys (the
    // most n_keys[t] of its tokens) into tiles of key_tile. A list without keys gets no unit.
    KeyTileUnits(const KeyTileUnitsPlan& plan, char* base, const int32_t* token_list, const int32_t* n_keys,
                 int64_t key_tile);
    int64_t units() const { return unit_off_[plan_.n_lists]; }
    // Unit u. `list` is the caller's cursor: start it at 0; it only moves forward when u increases.
    KeyTileUnit unit(int64_t u, int64_t& list) const;

private:
    KeyTileUnitsPlan plan_;
    int64_t key_tile_;
    int32_t* tokens_;
    int32_t* list_off_;
    int64_t* unit_off_;
    int32_t* list_keys_;
};

}  // namespace sieve::cpu
