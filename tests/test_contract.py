"""Registered ids against the testing kit: the kernel contract
(:func:`gemjax.testing.check_kernel_contract`) on each game's first and ``-random``
ids, and GEM parity on the base adversarial stream
(:func:`gemjax.testing.check_gem_parity`) on every id. A new game is covered here the
moment it is registered.

The first id of each game runs in the quick tier; its other ids are marked slow.
"""

from __future__ import annotations

import gem
import pytest
from gem.envs.registration import ENV_REGISTRY
from tiers import FIRST_OF_GAME, IDS, tiered

import gemjax
from gemjax import testing

# gem-llm ids whose constructor raises (spec section 23): gemjax's work
# (docs/gem_differences.md), and GEM has nothing to compare them with.
GEM_CANNOT_CONSTRUCT = {
    "game:FifteenPuzzle-v0-random": TypeError,
    "game:Crosswords-v0-random": ValueError,
}


# Each game's first id and its -random id, which plays every configuration of the
# game (the contract is about the kernel's mechanics: jit, vmap, retracing, layout);
# every id's behaviour is the GEM parity test's below.
CONTRACT_IDS = tuple(i for i in IDS if i in FIRST_OF_GAME or i.endswith("-random"))


@pytest.mark.parametrize("env_id", tiered(CONTRACT_IDS))
def test_kernel_contract(env_id: str) -> None:
    env = gemjax.make(env_id)
    play = testing.check_kernel_contract(env)
    # Random play reaches more than one message besides the instructions.
    assert len(set(play.kinds[play.kinds >= 0].tolist())) >= 3


@pytest.mark.parametrize(
    "env_id", tiered([i for i in IDS if i in ENV_REGISTRY and i not in GEM_CANNOT_CONSTRUCT])
)
def test_gem_parity_on_the_base_stream(env_id: str, nltk_words) -> None:
    seen = testing.check_gem_parity(gem.make(env_id), env_id, episodes=8, stream_seed=1)
    assert seen["format_error"] > 0, seen
    assert len(seen) >= 3, seen


@pytest.mark.parametrize("env_id", sorted(GEM_CANNOT_CONSTRUCT))
def test_gem_still_cannot_construct(env_id: str) -> None:
    """The ids left out of parity still crash in gem-llm, and gemjax makes them."""
    with pytest.raises(GEM_CANNOT_CONSTRUCT[env_id]):
        gem.make(env_id)
    gemjax.make(env_id)


def test_every_game_has_a_quick_contract_run() -> None:
    games = {type(gemjax.make(i)) for i in IDS}
    assert {type(gemjax.make(i)) for i in FIRST_OF_GAME} == games
    assert len(FIRST_OF_GAME) == len(games)


def test_classifier_names_every_message_of_each_table() -> None:
    """Each message, rendered, is classified as itself (Choice options named)."""
    for env_id in sorted(FIRST_OF_GAME):
        table = gemjax.make(env_id).messages
        classify = testing.message_classifier(table)
        zeros = [0] * len(table.arg_names)
        for kind, name in enumerate(table.names):
            got = classify(table.render(kind, zeros))
            assert got == name or got.startswith(name + "["), (env_id, name, got)
        assert classify("no message looks like this") == "other"


def test_make_checks_the_game_protocol() -> None:
    """``make`` refuses a game whose text members, GEM mirror name or capabilities
    are missing or mistyped, naming the member."""
    from gemjax.envs import GuessTheNumber
    from gemjax.registry import check_protocol
    from gemjax.text import MessageTable, Template

    cases = (
        ("grammar", None, "grammar must be a Grammar"),
        ("messages", MessageTable(instructions=Template("Play.")), "format_error"),
        ("gem_class_name", "", "gem_class_name must name GEM's env class"),
        ("valid_action_mask", 3, "valid_action_mask must be a method"),
    )
    for member, value, match in cases:
        env = GuessTheNumber(min_number=1, max_number=5, max_turns=3)
        setattr(env, member, value)
        with pytest.raises(TypeError, match=match):
            check_protocol(env)
    check_protocol(gemjax.make("game:GuessTheNumber-v0-easy"))


def test_a_game_without_its_protocol_methods_fails_at_construction() -> None:
    """A game that leaves out ``random_action`` (kernel) or ``state_from_gem`` /
    ``kwargs_from_gem`` (GEM mirror) cannot be built: the error names the method."""
    from gemjax.core import Environment, GemMirror
    from gemjax.envs import GuessTheNumber

    own = {
        name: value
        for name, value in vars(GuessTheNumber).items()
        if name == "__init__" or (not name.startswith("__") and name != "_abc_impl")
    }
    complete = type("Complete", (Environment, GemMirror), own)
    complete(min_number=1, max_number=5, max_turns=3)
    for member in ("random_action", "state_from_gem", "kwargs_from_gem"):
        without = {name: value for name, value in own.items() if name != member}
        partial = type("Partial", (Environment, GemMirror), without)
        with pytest.raises(TypeError, match=member):
            partial(min_number=1, max_number=5, max_turns=3)
