"""Fixtures shared by several test modules."""

from tests.netns import procs, two_hosts  # noqa: F401 (fixtures, found here by pytest)
from tests.remote_served import served, shared_servers  # noqa: F401 (fixtures, as above)
