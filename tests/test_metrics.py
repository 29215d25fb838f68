import pytest
from megrag_kit.metrics import (exact_match, f1_score, answer_containment, recall_at_k, chain_at_k, hit_at_k, mrr, retrieval_scores,
                                paired_bootstrap, bootstrap_ci, normalize_answer)


@pytest.mark.parametrize("pred,gold,em,f1", [
    ("The Beatles", "Beatles", 1.0, 1.0),                 # article dropped
    ("beatles!", "The Beatles.", 1.0, 1.0),               # punctuation and case
    ("John Lennon and Paul", "Paul McCartney", 0.0, 1 / 3),  # token overlap: P=1/4, R=1/2
    ("yes", "no", 0.0, 0.0), ("no", "no", 1.0, 1.0),
    ("no way", "no", 0.0, 0.0),                           # gold is special, prediction differs: F1 0
    ("noanswer", "noanswer", 1.0, 1.0), ("unknown", "Paris", 0.0, 0.0),
])
def test_answer_metrics(pred, gold, em, f1):
    assert exact_match(pred, [gold]) == em
    assert f1_score(pred, [gold]) == pytest.approx(f1)


@pytest.mark.parametrize("pred,gold", [("", "The The"), ("", ""), (".", "  "), ("the", "a"), ("", "Paris"), ("Paris", "."), ("  ", ["Paris", "The"])])
def test_degenerate_strings_match_nothing_in_every_answer_metric(pred, gold):
    # the rule: a prediction or gold that normalizes to empty scores 0 in EM, F1 and containment alike
    golds = gold if isinstance(gold, list) else [gold]
    assert (exact_match(pred, golds), f1_score(pred, golds), answer_containment(pred, golds)) == (0.0, 0.0, 0.0)


def test_aliases_take_the_max():
    assert f1_score("Motor City", ["Detroit", "Motor City"]) == 1.0 and exact_match("motor city", ["Detroit", "Motor City"]) == 1.0
    assert normalize_answer("  An  apple\ta DAY ") == "apple day"
    assert answer_containment("It is the Motor City, Michigan", ["Motor City"]) == 1.0
    assert answer_containment("the Motor Cityscape", ["Motor City"]) == 0.0      # token span, not substring


def test_retrieval_metrics_by_id():
    ranked, gold = [4, 9, 2, 7, 1, 3], [2, 3]
    assert recall_at_k(ranked, gold, 5) == 0.5 and chain_at_k(ranked, gold, 5) == 0.0 and chain_at_k(ranked, gold, 6) == 1.0
    assert hit_at_k(ranked, gold, 2) == 0.0 and hit_at_k(ranked, gold, 3) == 1.0 and mrr(ranked, gold) == pytest.approx(1 / 3)
    with pytest.raises(ValueError): recall_at_k(ranked, [], 5)


def test_retrieval_scores_at_several_k():
    # gold 2 at rank 3 and 3 at rank 6: nothing at K=1,2; half the chain at K=5; the whole chain from K=10 on
    ranked, gold = [4, 9, 2, 7, 1, 3, 8], [2, 3]
    s = retrieval_scores(ranked, gold)
    assert set(s) == {f"{m}@{k}" for m in ("recall", "chain", "hit") for k in (1, 2, 5, 10, 20)} | {"mrr"}
    assert [s[f"recall@{k}"] for k in (1, 2, 5, 10, 20)] == [0.0, 0.0, 0.5, 1.0, 1.0]
    assert [s[f"chain@{k}"] for k in (1, 2, 5, 10, 20)] == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert [s[f"hit@{k}"] for k in (1, 2, 5, 10, 20)] == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert s["mrr"] == pytest.approx(1 / 3)
    assert retrieval_scores(ranked, gold, ks=(3,)) == {"recall@3": 0.5, "chain@3": 0.0, "hit@3": 1.0, "mrr": pytest.approx(1 / 3)}
    assert retrieval_scores(ranked, []) == {}
    assert retrieval_scores([], gold, ks=(5,)) == {"recall@5": 0.0, "chain@5": 0.0, "hit@5": 0.0, "mrr": 0.0}


def test_paired_bootstrap_detects_a_real_difference_and_not_a_null_one():
    import numpy as np
    rng = np.random.default_rng(1)
    base = rng.random(300)
    a = {str(i): v + 0.05 for i, v in enumerate(base)}; b = {str(i): v for i, v in enumerate(base)}
    r = paired_bootstrap(a, b)
    assert r["lo"] == pytest.approx(0.05) and r["hi"] == pytest.approx(0.05)  # constant paired difference
    noise = {str(i): v + rng.normal(0, 0.1) for i, v in enumerate(base)}
    r2 = paired_bootstrap(noise, b)
    assert r2["lo"] < 0 < r2["hi"] and r2["n"] == 300
    m, lo, hi = bootstrap_ci(list(base))
    assert lo < m < hi and hi - lo < 0.1
