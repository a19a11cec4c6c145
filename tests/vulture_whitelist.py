# ruff: noqa: B018  (each line names something, for vulture to count as used)
"""Names vulture cannot see used: read by a framework, a template, a plugin or a file.

Everything else in ksi/ that nothing uses is dead and goes (tests/test_dead_code.py).
Hook implementations (``ksi_*``) and functions registered by decorator (typer
commands, attrs validators and defaults, ``@hookimpl``) are left out in
pyproject.toml's ``[tool.vulture]`` instead of being listed here.
"""

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# Called by Python or a framework, never by name: module __getattr__/__dir__, the
# import-system finder of the old paths, click's group and argument hooks, attributes
# set on an object for Python's introspection or tarfile, signal handler and attrs
# validator arguments.
_.__getattr__
_.__dir__
_.create_module
_.find_spec
_.list_commands
_.format_commands
_._usage_display_name
_.__class__
_.__signature__
_.__wrapped__
_.gname
_.uname
_.frame
_.instance
# A typer option handled by its callback (--config-file), not in the command's body.
_.config_file
# The ACP client's methods the agent-client-protocol package calls by their protocol names.
_.session_update
_.request_permission

# The API plugins and users call (docs/python-api.md, docs/plugins.md).
_.load_tasks_for_source
_.cancel_all
_.copy_in
_.copy_out
# Helpers for task sources and evaluators that read untrusted trees (the in-repo plugins).
_.drop_links
_.json_depth_problem
_.toml_depth_problem
_.link_problems
# Kept for code that read it from ksi.attempt.components (ksi.kinds declares it now).
_.OPTION_FLAGS
# Kept for code that catches parse_notes' error by the agent distiller's old name for it.
_.DistillFailed

# Fields written to run.json, generations.jsonl, the journal or --json output, and
# read by the reports, the viewer's templates (ksi/view/templates) or the tests.
_.at
_.seed_knowledge_sha256
_.generations_run
_.distill_cost_usd
_.not_distilled
_.eval_status
_.oracle_score
_.nop_score
_.files_copied
_.bytes_copied
_.symlinks_kept
_.noise_dropped
_.skipped_total
_.css_class
_.pos
_.x_ticks
_.y_ticks
_.flipped
_.show_generations
_.hidden_steps  # ksi/view/templates/steps.html.j2
_.post_ids  # generations.jsonl's forum_round lines (people and tests read them)
# attrs compares it (order=True): retries ready at the same time keep their order.
_.sequence

# The MCP server's tools: the SDK calls them by the names its decorator registered.
_.knowledge_search
_.knowledge_note
_.knowledge_task
_.forum_read
_.forum_post
_.forum_done
