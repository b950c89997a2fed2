"""The null candidates' source bytes: ``candidate_sha256`` keys the committed calibration records, so every kind's
source for a given problem must stay byte-identical wherever the templates live (pinned here for four level-1
problems and DLRM-Bench 5, whose ``forward`` returns a tuple and so takes the sequence forms of ``zeros`` and ``mean``).
"""

from __future__ import annotations

import pytest

from kbstudy.harness.candidates import NULL_CANDIDATES, null_candidates
from kbstudy.suites.dlrm_bench import load_dlrm_problems

PINNED = [
    ("1_Square_matrix_multiplication_.py", {
        "reference": "befd487d7d824ced4a21b14f2819aa79e8193f454a61e9bdbeac31d47d06ee4d",
        "zeros": "b52367c6afd9403c8f2100f84e4331c5012b171e897f5534a2af99e5822955f6",
        "mean": "cf282cceac9e34ac1b023f1b51c1e4a630537bd07d33079c36aa05bab035d232",
        "noise": "ec3dad3b9da50f9722a4358e285fd02a496ba889b7b63ce0c182b78d0580c392",
        "partial0.3": "2730aa0810378fd3c3df0a581ced2637b33f47779c7e45346c1dab49e2e7bac9",
        "partial10": "08dba1ff362a9020c9a693ff25b503d91dffa93a5e971a3ed090f39fd64fbfb1",
        "partial50": "9c3a4d5b3328d7ff4e793b3d3324cabb530be668d89aa9f257d54f7841d4ac74",
        "partial90": "bb6b48394f28523d71c849c73aa03e0d66b69809175a74e0a06f6c0eafbe72bd",
        "lowprec": "b2602d4f6dc94f1bb7b7563a1c1aedcfa3f3f6ef03b867a533459bb833122949",
        "compile": "12fc1a9594ece7d8b72fe23b464398fb3fb5aeb51c499826db3df33edf300690",
    }),
    ("19_ReLU.py", {
        "reference": "d7eb43103db32b0bc826d163437f487be2e384a0873817a991e1c86cdb62e2b9",
        "zeros": "c4a753ecbffba1e23345cf5cf560e673b7de767b835c5074a3fc21c54b9e5c9d",
        "mean": "f4d8b740cd1b7305c0db63337e681d50790cecfd418e896f76bf72918d0dd2fd",
        "noise": "33c6634bab4fb5f75c06595e6fce7b02f5888f2e1e6a14a72a92233306ca660b",
        "partial0.3": "7fa22752be15bd08b173584b3d9673b8dbad81db1353429d1ff94c2960ab99cd",
        "partial10": "6b092d510d1a34a18a260d312219626fa372accf872730d7cff28de063a6c1ee",
        "partial50": "7fad777156eb153a4d6a2bef70c0dfd6cfccd2d4143614c6e83f8f0b7a785ed9",
        "partial90": "3d6da1fc656f3f4eab4e6752a3bef0aada8ec2fef4b8c2a20f19ef7008801e96",
        "lowprec": "f823087f5ba2bdb67d4f3452fc27cc8e4ad447af71636d4d9a3c49f42fd30213",
        "compile": "9d3535cebf43a95e560412a7c8de3b81c7fdef036e1f28d6d1e5d52f42801d10",
    }),
    ("23_Softmax.py", {
        "reference": "a0775f9b3b34f15562a31018dbda8da5cd01ba257e7d987a3b12fc3e5d037121",
        "zeros": "faf149906deb00e3578288d018bfa502d1d78231612d89e81e3cc206d9c79fca",
        "mean": "9ae83ef9cafd3f782e9cc264f0e95f92534b906d7b3436509b90b786088ea361",
        "noise": "ae1673b42643d560516931fb0f6ff386540931b83063b0ca1ed59fc4149271c8",
        "partial0.3": "37a6470f8ecc40845ea101e4e4046a04034e219a6f8f46942ae7bb01acff7095",
        "partial10": "635f538f6d14e39bb9ac119b8ced92fd0463f9a1cdf4b50ad84dde982b01589f",
        "partial50": "2fe5b495035b372db5c1661d7ee894a8155281e7f014df5650e3ec363ab7fc82",
        "partial90": "8200a81d68b2f0a6627cf5e17598baf1e078110307e3fd0482cadf92da920775",
        "lowprec": "e25f654877bb54a8ed4f4a8e1ce132755c3db1497b40c096b4d5ae7cfba8d80e",
        "compile": "d8f66ecb96dfbfed7a634700c058f043aae0bc4c4ecb1f4ca26856448ce3d857",
    }),
    ("95_CrossEntropyLoss.py", {
        "reference": "f79cdf735e4c715fe186805afc49995b0a0f182e66c1c0641e2a48a80e45d99f",
        "zeros": "1f9b1e119a1c6e1517012911c6a1a8d640981a68b38b609181c9911a2384b1c6",
        "mean": "15f94db32de7d0bef22f016fbddd147998eec0c3cd79f5662a222366469ce8cc",
        "noise": "0ffa89c3067b130e5840ce9ef86666dc5f9ad2699cda9482b74a6014e1eb5b0d",
        "partial0.3": "69964a2251d9a5ea5632f6f96f2a853022a9c1beb8e8cb31717d9109e3ca999f",
        "partial10": "78d6d448d759c6f926e164c922e1139150a77b5f60d7bd9133574929b92aecc7",
        "partial50": "2456bbde692f9744db3a3d6dee554181742a1cf688cdcf8510f5985c93da3f1c",
        "partial90": "850a8a523b56db667b32802c32c6e164a24952c115175b97c6836c049a3e46c2",
        "lowprec": "c686b80e4705a90d05ab50f3cdd34266321e00f96a7a18e93f369eddb61fe03c",
        "compile": "e29dc031cd0de39687548d436a350ef3e7fb1fe019130842b3615d630d912a7f",
    }),
    ("5_EmbeddingBagBackwardRowwiseAdagrad.py", {
        "reference": "229152a9ab82e0a2fb01d87af299bbdd2fc7de4594c6c80c3d5cc795eb125637",
        "zeros": "e5990e6d7babe234e1204189d6702fff857adfbb680ca033764ef32ed7c28754",
        "mean": "51859267939bb15f8b03eeef5f1692d52cb87ad8ac7e2491c4bd08675230c631",
        "noise": "097b52d0cc2425ee24a98a80b98d5996c5e760eda16ae42675428e79a8e57afe",
        "partial0.3": "4363d84660103c1a10191a46ad71a3ad687a4c486568bf4f3e63eacc566cf6db",
        "partial10": "1637f5c7b2c163df34d98b3efd9bbcc126c62be13006263ebf8bbc54db8d522e",
        "partial50": "0123659fb89d5bf599dfd7342b384f111216a6406dd284230c52ba2f9fca4734",
        "partial90": "83f956a9b4383323fadafb86c6eb7fe36c982284e5c2ff9769434d15ab23ca91",
        "lowprec": "470a969c1409138a67907468414040dc631146cee329dc0af3b4c456b325f77e",
        "compile": "ff3cc44cc4a381bfd9e68fc3327c4e850b25044fde892c47d8d0109b3373f0a8",
    }),
]


@pytest.mark.parametrize("name,expected", PINNED, ids=[name for name, _ in PINNED])
def test_null_candidate_sources_are_byte_identical(name, expected, problem_by_name):
    problem = problem_by_name.get(name) or {p.name: p for p in load_dlrm_problems()}[name]
    got = {c.model_config.removeprefix("null:"): c.sha256 for c in null_candidates(problem)}
    assert tuple(got) == NULL_CANDIDATES
    assert got == expected
