#include "backends/cpu/key_tile_units.h"

#include <algorithm>

#include "sieve/backends/backend.h"

namespace sieve::cpu {

KeyTileUnitsPlan key_tile_units_plan(int64_t n_tokens, int64_t n_lists) {
    KeyTileUnitsPlan p;
    p.n_tokens = std::max<int64_t>(n_tokens, 0);
    p.n_lists = std::max<int64_t>(n_lists, 0);
    p.tokens = 0;
    p.list_off = workspace_round_up(p.n_tokens * 4);
    p.unit_off = p.list_off + workspace_round_up((p.n_lists + 1) * 4);
    p.list_keys = p.unit_off + workspace_round_up((p.n_lists + 1) * 8);
    p.bytes = p.list_keys + workspace_round_up(p.n_lists * 4);
    return p;
}

KeyTileUnits::KeyTileUnits(const KeyTileUnitsPlan& plan, char* base, const int32_t* token_list, const int32_t* n_keys,
                           int64_t key_tile)
    : plan_(plan),
      key_tile_(std::max<int64_t>(key_tile, 1)),
      tokens_(reinterpret_cast<int32_t*>(base + plan.tokens)),
      list_off_(reinterpret_cast<int32_t*>(base + plan.list_off)),
      unit_off_(reinterpret_cast<int64_t*>(base + plan.unit_off)),
      list_keys_(reinterpret_cast<int32_t*>(base + plan.list_keys)) {
    const int64_t lists = plan.n_lists;
    std::fill(list_off_, list_off_ + lists + 1, 0);
    std::fill(list_keys_, list_keys_ + lists, 0);
    for (int64_t t = 0; t < plan.n_tokens; ++t) {  // a stable counting sort by list
        const int32_t l = token_list[t];
        ++list_off_[l + 1];
        list_keys_[l] = std::max(list_keys_[l], n_keys[t]);
    }
    unit_off_[0] = 0;
    for (int64_t l = 0; l < lists; ++l) {
        const int64_t tiles = (list_keys_[l] + key_tile_ - 1) / key_tile_;
        list_off_[l + 1] += list_off_[l];
        unit_off_[l + 1] = unit_off_[l] + tiles;
    }
    for (int64_t t = 0; t < plan.n_tokens; ++t) tokens_[list_off_[token_list[t]]++] = static_cast<int32_t>(t);
    for (int64_t l = lists; l > 0; --l) list_off_[l] = list_off_[l - 1];  // list_off_[l] had become list l's end
    list_off_[0] = 0;
}

KeyTileUnit KeyTileUnits::unit(int64_t u, int64_t& list) const {
    while (unit_off_[list + 1] <= u) ++list;
    KeyTileUnit r;
    r.list = list;
    r.k0 = (u - unit_off_[list]) * key_tile_;
    r.k1 = std::max<int64_t>(r.k0, std::min<int64_t>(list_keys_[list], r.k0 + key_tile_));
    r.tokens = tokens_ + list_off_[list];
    r.n_tokens = list_off_[list + 1] - list_off_[list];
    return r;
}

}  // namespace sieve::cpu
