"""The steps the commands run: each takes a frozen options object and returns a typed result.

A command (:mod:`dswheels.commands`) parses its flags into a step's options, calls the step,
and renders what it returns; the step does the work through the rest of :mod:`dswheels.effects`
and decides with :mod:`dswheels.core`. Progress goes to the reporter (:mod:`dswheels.log`);
the step never prints its result.

    selection     which cells: the matrix, a plan file, cell ids, or this machine
    this_machine  this machine's Python, OS, torch and toolkit as one planned cell
    published     where the wheels are published, and leaving those cells out
    plan          ``dswheels plan``: the plan, the canary, its jobs
    ci            ``dswheels ci plan``: what a workflow run builds and publishes
    build         ``dswheels build``: build (or prepare) the selected cells, verify, install
    verify        ``dswheels verify``: a wheel's static and run-time checks
    smoke         ``dswheels smoke``: train a tiny model with a wheel
    publish       ``dswheels publish``: wheels to a directory, a GitHub Release or an upload server
    site          ``dswheels index``: the static index of what is published
    doctor        ``dswheels doctor``: this machine's facts and their diagnosis
    install       ``dswheels install``: the published wheel that fits, installed and checked
    facts         ``dswheels facts check``: compat.yml against its sources
    follow        ``dswheels facts builds|dispatch|issue``: the follow workflow's steps
"""
