"""What the members of a consumer group subscribe to: the topics they name, the topics their
regular expressions resolve to (Kafka's ConsumerGroupRegularExpression records, matched with
RE2 as Kafka's RE2J does), and the metadata of the subscribed topics that exist.

``topics`` is the shard's topic metadata (GroupContext.topics): get(name), names(), version().
"""
from __future__ import annotations

from functools import lru_cache

from protocol.errors import ErrorCode

from . import records as crec
from ..group import GroupError
from .group import ConsumerGroup


def resolve_regexes(topics, group: ConsumerGroup, member, updated, records: list, now: int,
                    topic_filter=None) -> dict | None:
    """Resolve the regexes the group uses against the topics as they are now (those
    ``topic_filter`` lets the heartbeating member see, as Kafka's TopicRegexResolver keeps
    the topics its principal may describe); a record for each one whose topics changed.
    -> {regex: topics} of what changed, or None."""
    regexes = set(group.regex_members)
    if member.subscribed_topic_regex and group.regex_members.get(
            member.subscribed_topic_regex, 0) <= 1 and \
            member.subscribed_topic_regex != updated.subscribed_topic_regex:
        regexes.discard(member.subscribed_topic_regex)
        if member.member_id in group.members:
            records.append(crec.regex_tombstone(group.group_id,
                                                member.subscribed_topic_regex))
    if updated.subscribed_topic_regex:
        regexes.add(updated.subscribed_topic_regex)
    if not regexes:
        return None
    version = topics.version()
    names = None
    changed = {}
    for regex in sorted(regexes):
        known = group.resolved_regexes.get(regex)
        if known is not None and group.regex_version == version:
            continue
        if names is None:
            names = [n for n in topics.names()
                     if topic_filter is None or topic_filter(n)]
        pattern = compile_regex(regex)
        matched = frozenset(n for n in names if pattern.fullmatch(n))
        if matched != known:
            changed[regex] = matched
            records.append(crec.regex_record(group.group_id, regex, matched, version, now))
    if not changed and names is not None:
        group.regex_version = version  # a cache: every regex still matches the same topics
    return changed or None


def subscribed_names(group: ConsumerGroup, member, updated, resolved) -> set:
    """Every topic the group subscribes to once ``member`` became ``updated``."""
    counts = dict(group.subscribed_names)
    if member.member_id in group.members:
        for name in member.subscribed_topic_names:
            counts[name] -= 1
    for name in updated.subscribed_topic_names:
        counts[name] = counts.get(name, 0) + 1
    names = {name for name, n in counts.items() if n > 0}
    regex_counts = dict(group.regex_members)
    if member.member_id in group.members and member.subscribed_topic_regex:
        regex_counts[member.subscribed_topic_regex] -= 1
    if updated.subscribed_topic_regex:
        regex_counts[updated.subscribed_topic_regex] = \
            regex_counts.get(updated.subscribed_topic_regex, 0) + 1
    for regex, n in regex_counts.items():
        if n > 0:
            matched = (resolved or {}).get(regex)
            names.update(matched if matched is not None
                         else group.resolved_regexes.get(regex, ()))
    return names


def topic_metadata(topics, names) -> dict:
    """{topic_id: (name, partitions)} of the subscribed topics that exist."""
    out = {}
    for name in names:
        found = topics.get(name)
        if found is not None:
            topic_id, partitions = found
            out[topic_id] = (name, partitions)
    return out


def validate_regex(regex: str) -> None:
    """A SubscribedTopicRegex RE2 cannot read is answered INVALID_REGULAR_EXPRESSION."""
    try:
        compile_regex(regex)
    except _re2().error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) \
            else str(exc)
        raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular "
                         f"expression: {reason}.") from None


@lru_cache(maxsize=1)
def _re2():
    """The RE2 binding, loaded by the first regex subscription (not at every start)."""
    import re2
    return re2


@lru_cache(maxsize=1)
def _re2_options():
    options = _re2().Options()
    options.log_errors = False   # a bad regex is answered, not logged to stderr
    return options


@lru_cache(maxsize=1024)
def compile_regex(regex: str):
    """The regex as Kafka's RE2J reads it: RE2 syntax, matched against the whole topic name."""
    return _re2().compile(regex, _re2_options())
