"""What the test tiers share (``tests/`` is on the import path through ``tests/conftest.py``):

* ``committed``: the committed record folders a test reads (a missing one fails the test);
* ``fixture_records``: hand-written record rows and the committed calibration slices;
* ``helpers``: the KernelBench data folder, a fast CPU ``EvalConfig``, hand-written torch candidates;
* ``kernelbench_fixtures``: the KernelBench fixtures every tier sees (loaded by ``tests/conftest.py``);
* ``chat_server``: the loopback chat-completions server of the generation tests;
* ``tiers``: the hook each tier folder's ``conftest.py`` uses to mark its tests.
"""
