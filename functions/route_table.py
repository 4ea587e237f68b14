"""Routes declared with FastAPI's decorators, built once: on the app that serves them.

An `APIRouter`'s decorators build each route (its parameters' and response's pydantic
validators) when the module is imported, and adding the router's routes to an app builds every
one of them again, there. The management API adds its route modules' routes to its app as its
own (`functions.management`), so a `RouteTable` only records what each decorator declares and
builds the routes when they are added, with exactly those arguments:

    routes = RouteTable(tags=["handoff"])

    @routes.get("/handoffs", response_model=WaitingList)
    async def list_handoffs(...) -> WaitingList: ...

    routes.add_to(app)  # app.add_api_route("/handoffs", list_handoffs, methods=["GET"], ...)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import FastAPI

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


@dataclass(frozen=True)
class DeclaredRoute:
    path: str
    endpoint: Callable[..., Any]
    methods: tuple[str, ...]
    options: dict[str, Any]  # the decorator's other keyword arguments, as given


@dataclass
class RouteTable:
    """Routes declared with `get`/`post`, in order; `tags` are added to each one's own."""

    tags: Sequence[str] = ()
    routes: list[DeclaredRoute] = field(default_factory=list)

    def get(self, path: str, **options: Any) -> Callable[[Endpoint], Endpoint]:
        return self._declare(path, ("GET",), options)

    def post(self, path: str, **options: Any) -> Callable[[Endpoint], Endpoint]:
        return self._declare(path, ("POST",), options)

    def _declare(
        self, path: str, methods: tuple[str, ...], options: dict[str, Any]
    ) -> Callable[[Endpoint], Endpoint]:
        def declare(endpoint: Endpoint) -> Endpoint:
            self.routes.append(DeclaredRoute(path, endpoint, methods, options))
            return endpoint

        return declare

    def add_to(self, app: FastAPI) -> None:
        """Build the routes on `app`, as its own routes, in the order they were declared."""
        for route in self.routes:
            options = dict(route.options)
            tags = [*self.tags, *options.pop("tags", ())]
            app.add_api_route(
                route.path,
                route.endpoint,
                methods=list(route.methods),
                tags=tags or None,
                **options,
            )


__all__ = ["DeclaredRoute", "RouteTable"]
