"""The layer ids containers/image gives a pulled image's layers, which staged layers must carry to be reused."""

import pytest

from imagectl.engine.layer_store import storage_layer_id

# The diff_ids of a real assembled torch image (its system layers, then the cuda, framework and rest lock layers)
# and the ids `buildah pull oci:` (buildah 1.28.2, containers/image) gave its layers in an empty store, read from
# its debug log ("Applying tar in .../overlay/ID/diff") on 2026-12-03.
DIFF_IDS = ["sha256:cabf022642b68de14cb754e667f437a5760ad5f576e09027ea1b358aa7fe340b",
            "sha256:371fc66a1c134b6ee471e1aab2592458a14ef0e85545a96d9dd676a598898e7e",
            "sha256:35fb8649b57d6a62ed8bc7284078167abc0d55764240cb0557f8e91c2b8036ec",
            "sha256:3589ac77f4475e5e3bb5afd0edf10b06b461c8ffe9fd561b7efcc42725af23ec",
            "sha256:d828c3a50ce1823650d0c105346efb673713e8b1843d69ce20909e6a82022c9c"]
PULLED_IDS = ["cabf022642b68de14cb754e667f437a5760ad5f576e09027ea1b358aa7fe340b",
              "1bf12aaa981840a7a213739c8d4a849d9aef6642176d4439064ebfa635601b82",
              "f4570812d190392b15d5e15ac45f981f73cc0458c599b476cde470ef629a795f",
              "1de1b7db64e0acf845db52425ad5453bf43c58c4cbcaccbc9c2da82003f93c08",
              "ae41d14dc929673b946a3b0ed492ee5cc46e6c359baf617d76d054b5ee1da7ed"]


def test_each_layer_id_is_the_one_a_pull_gives_it():
    assert [storage_layer_id(DIFF_IDS[:n]) for n in range(1, len(DIFF_IDS) + 1)] == PULLED_IDS


def test_an_id_depends_on_every_layer_below():
    assert storage_layer_id([DIFF_IDS[1], DIFF_IDS[2]]) != PULLED_IDS[2]
    assert storage_layer_id([DIFF_IDS[2]]) == DIFF_IDS[2].removeprefix("sha256:")


@pytest.mark.parametrize("chain", [[], ["sha512:" + "0" * 64], ["sha256:abc"], [DIFF_IDS[0], "cabf"]])
def test_a_chain_that_is_not_sha256_diff_ids_is_refused(chain):
    with pytest.raises(ValueError):
        storage_layer_id(chain)
