"""k8s.io/apimachinery pkg/util/validation: the name rules every object's metadata meets, with their messages word
for word (IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue; RegexError joins its examples with
",  or "), and ValidateLabels / ValidateAnnotations of pkg/apis/meta/v1/validation and pkg/api/validation.

Each `is_*` returns the messages (empty when valid); the callers attach the field path and value, as field.Invalid
does."""

from __future__ import annotations

import re
from collections.abc import Mapping

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL_MAX = 63
HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE = 256 * 1024  # TotalAnnotationSizeLimitB

_DNS1123_LABEL = re.compile(f"^{DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(f"^{DNS1035_LABEL_FMT}$")
_HTTP_PATH = re.compile(f"^{HTTP_PATH_FMT}$")
_QUALIFIED_NAME = re.compile(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^{LABEL_VALUE_FMT}$")

_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                      "start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")

_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError: the message, its examples and the regular expression."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {shown}, regex used for validation is '{fmt}')"


def max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    out = [max_len_error(DNS1123_LABEL_MAX)] if len(value) > DNS1123_LABEL_MAX else []
    if not _DNS1123_LABEL.match(value):
        out.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return out


def is_dns1123_subdomain(value: str) -> list[str]:
    out = [max_len_error(DNS1123_SUBDOMAIN_MAX)] if len(value) > DNS1123_SUBDOMAIN_MAX else []
    if not _DNS1123_SUBDOMAIN.match(value):
        out.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return out


def is_dns1035_label(value: str) -> list[str]:
    out = [max_len_error(DNS1035_LABEL_MAX)] if len(value) > DNS1035_LABEL_MAX else []
    if not _DNS1035_LABEL.match(value):
        out.append(regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return out


def domain_prefixed_path_errors(value: str) -> list[tuple[str, str]]:
    """IsDomainPrefixedPath: (the invalid value field.Invalid shows, message) for each problem of a
    `<dns-1123 subdomain>/<http path>` such as "acme.io/foo"."""
    host, sep, path = value.partition("/")
    if not sep or not host or not path:
        return [(value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    out = [(host, msg) for msg in is_dns1123_subdomain(host)]
    if not _HTTP_PATH.match(path):
        out.append((path, regex_error("Invalid path", HTTP_PATH_FMT)))
    return out


def is_qualified_name(value: str) -> list[str]:
    """A label or annotation key: an optional DNS-1123 subdomain prefix and '/', then a name of at most 63
    characters."""
    parts = value.split("/")
    out: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            out.append("prefix part must be non-empty")
        else:
            out += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                                  "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        out.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        out.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME.match(name):
        out.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name",
                                              "123-abc"))
    return out


def is_valid_label_value(value: str) -> list[str]:
    out = [max_len_error(LABEL_VALUE_MAX)] if len(value) > LABEL_VALUE_MAX else []
    if not _LABEL_VALUE.match(value):
        out.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return out


Problem = tuple[str | None, str, str]  # (the key it is about, the invalid value field.Invalid shows, message)


def label_errors(labels: Mapping[str, str]) -> list[Problem]:
    """ValidateLabels: each invalid key (a qualified name) and value, in the map's order."""
    out: list[Problem] = []
    for key, value in labels.items():
        out += [(key, key, msg) for msg in is_qualified_name(key)]
        out += [(key, value, msg) for msg in is_valid_label_value(value)]
    return out


def annotation_errors(annotations: Mapping[str, str]) -> list[Problem]:
    """ValidateAnnotations: keys are qualified names whatever their case; all of them, keys and values, at most
    256 KiB together (then a problem about no key, with field.TooLong's message)."""
    out: list[Problem] = [(key, key, msg) for key in annotations for msg in is_qualified_name(key.lower())]
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE:
        out.append((None, "", f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE} bytes"))
    return out
