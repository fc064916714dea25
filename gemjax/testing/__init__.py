"""What every game's tests call: the kernel contract and the GEM parity harness.

>>> import gemjax, gemjax.testing
>>> gemjax.testing.check_kernel_contract(gemjax.make("game:GuessTheNumber-v0-easy"))
"""

from gemjax.testing.kernel import (
    ActionFn,
    RandomPlay,
    actions_from,
    adversarial_actions,
    assert_trees_equal,
    check_grammar_round_trip,
    check_jit_matches_eager,
    check_kernel_contract,
    check_messages_render,
    check_no_retracing,
    check_random_play,
    check_structure,
    check_vmap_matches_loop,
    lane,
    mixed_actions,
    swept_params,
)
from gemjax.testing.parity import (
    DIGIT_ZEROS,
    OVER_LONG,
    SEPARATORS,
    ActionStream,
    check_gem_parity,
    check_step,
    message_classifier,
    mirror,
    parity_episodes,
    play_episode,
    preserved_global_rng,
    replay_draw,
)

__all__ = [
    "DIGIT_ZEROS",
    "OVER_LONG",
    "SEPARATORS",
    "ActionFn",
    "ActionStream",
    "RandomPlay",
    "actions_from",
    "adversarial_actions",
    "assert_trees_equal",
    "check_gem_parity",
    "check_grammar_round_trip",
    "check_jit_matches_eager",
    "check_kernel_contract",
    "check_messages_render",
    "check_no_retracing",
    "check_random_play",
    "check_step",
    "check_structure",
    "check_vmap_matches_loop",
    "lane",
    "message_classifier",
    "mirror",
    "mixed_actions",
    "parity_episodes",
    "play_episode",
    "preserved_global_rng",
    "replay_draw",
    "swept_params",
]
