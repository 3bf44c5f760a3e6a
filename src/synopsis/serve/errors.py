"""The service's error responses: one JSON shape, ``{"error": {"code", "message", "field"}}``.

:class:`ApiError` is an error response raised anywhere in a request; :func:`add_error_handlers` turns it, the
framework's validation errors (422, naming the field) and HTTP errors (404, 405) into that shape. The checks
of a request that pydantic cannot express (limits an operator may change) raise it too.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from synopsis.serve.schemas import EvaluateRequest
from synopsis.serve.settings import ServeSettings


class ApiError(Exception):
    """An error response: HTTP status, a stable code, a one-line message and the offending field."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message, "field": field}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def field_name(loc: tuple[Any, ...] | list[Any]) -> str | None:
    """("body", "options", "k") -> "options.k"; ("body", "instructions", 2) -> "instructions[2]"."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


class ClientGone(Exception):
    """The client closed the connection while its request waited or ran."""


def add_error_handlers(app: FastAPI) -> None:
    """Answer :class:`ApiError`, validation errors and HTTP errors as ``{"error": {...}}``."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> JSONResponse:
        return error_response(err.status, err.code, err.message, err.field, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        details = [
            {"field": field_name(e.get("loc", ())), "message": e.get("msg", ""), "type": e.get("type", "")}
            for e in errors
        ]
        first = details[0] if details else {"field": None, "message": "invalid request"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        return error_response(422, "validation_error", message, first["field"], details)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        if isinstance(err.__cause__, RecursionError):  # the framework's JSON parser gave up on the nesting
            return error_response(422, "validation_error", "the request body nests too deeply")
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return error_response(err.status_code, code, str(err.detail), headers=err.headers)


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: only white space and invisible format characters (zero-width space,
    joiners, byte-order mark: Unicode category Cf), which ``str.strip`` keeps."""
    return all(char.isspace() or unicodedata.category(char) == "Cf" for char in text)


def check_instructions(instructions: list[str] | None, settings: ServeSettings) -> list[str]:
    if not instructions:
        return []
    if len(instructions) > settings.max_instructions:
        raise ApiError(
            422,
            "validation_error",
            f"instructions: {len(instructions)} given, at most {settings.max_instructions} per request",
            "instructions",
        )
    for i, instruction in enumerate(instructions):
        if is_blank(instruction):
            raise ApiError(
                422, "validation_error", f"instructions[{i}]: empty instruction", f"instructions[{i}]"
            )
        if len(instruction) > settings.max_instruction_chars:
            raise ApiError(
                422,
                "validation_error",
                f"instructions[{i}]: {len(instruction)} characters, at most {settings.max_instruction_chars}",
                f"instructions[{i}]",
            )
    return [instruction.strip() for instruction in instructions]


def check_evaluate(body: EvaluateRequest, settings: ServeSettings) -> list[list[str]]:
    n = len(body.predictions)
    if n > settings.max_evaluate_examples:
        raise ApiError(
            422,
            "validation_error",
            f"predictions: {n} examples, at most {settings.max_evaluate_examples} per request",
            "predictions",
        )
    if len(body.references) != n:
        raise ApiError(
            422,
            "validation_error",
            f"references: {len(body.references)} given for {n} predictions",
            "references",
        )
    if body.sources is not None and len(body.sources) != n:
        raise ApiError(
            422, "validation_error", f"sources: {len(body.sources)} given for {n} predictions", "sources"
        )
    references = []
    for i, refs in enumerate(body.references):
        listed = not isinstance(refs, str)
        refs = refs if listed else [refs]
        if not refs:
            raise ApiError(422, "validation_error", f"references[{i}]: no references", f"references[{i}]")
        for k, ref in enumerate(refs):
            if not ref.strip():  # it would score 0 whatever the prediction
                where = f"references[{i}][{k}]" if listed else f"references[{i}]"
                raise ApiError(422, "validation_error", f"{where}: empty reference", where)
        references.append(refs)
    return references
