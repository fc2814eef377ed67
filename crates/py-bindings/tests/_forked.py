"""Forked worker processes for the tests, loaded by name by them (``import _forked``)."""

import multiprocessing


def in_forked_processes(target, argument_lists, timeout=120):
    """What ``target(*arguments, queue)`` puts in the queue, once per argument list, each in a
    forked process of its own, in the order they put it; once every process has ended well."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = [context.Process(target=target, args=(*arguments, queue)) for arguments in argument_lists]
    for process in processes:
        process.start()
    found = [queue.get(timeout=timeout) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return found
