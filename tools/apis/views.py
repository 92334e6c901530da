"""The tools API: tool servers (staff only: list, register, change, delete, discover) and the
tools they offer (any signed-in user: the editor lists them)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.apis.errors import InputRefused
from workflows.apis.schema import ErrorOutput, errors

from .. import client, selectors, services
from ..models import ToolServer
from .serializers import (
    ToolOutput,
    ToolServerCreateInput,
    ToolServerOutput,
    ToolServerPatchInput,
)


class IsStaff(permissions.BasePermission):
    message = "Only staff manage tool servers."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


def _server(name: str) -> ToolServer:
    server = selectors.tool_server(name)
    if server is None:
        raise NotFound(f"No tool server '{name}'.")
    return server


def _conflict(exc: Exception) -> Response:
    return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)


def _output(server: ToolServer) -> dict[str, Any]:
    return dict(ToolServerOutput(server).data)


class ToolServerListApi(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=ToolServerOutput(many=True))
    def get(self, request: Request) -> Response:
        """List the tool servers with their discovered tools."""
        return Response(ToolServerOutput(selectors.tool_servers_listed(), many=True).data)

    @extend_schema(request=ToolServerCreateInput, responses={201: ToolServerOutput, **errors(409)})
    def post(self, request: Request) -> Response:
        """Register a server (its tools are listed by POST …/discover)."""
        data = ToolServerCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            server = services.tool_server_create(**data.validated_data)
        except services.ToolServerInvalid as exc:
            raise InputRefused(exc.errors) from None
        except services.ToolServerConflict as exc:
            return _conflict(exc)
        return Response(_output(server), status=status.HTTP_201_CREATED)


class ToolServerDetailApi(APIView):
    permission_classes = [IsStaff]

    @extend_schema(responses=ToolServerOutput)
    def get(self, request: Request, name: str) -> Response:
        return Response(_output(_server(name)))

    @extend_schema(request=ToolServerPatchInput, responses={200: ToolServerOutput, **errors(409)})
    def patch(self, request: Request, name: str) -> Response:
        """Change settings; a new transport, URL or command clears the discovered tools."""
        server = _server(name)
        data = ToolServerPatchInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        try:
            services.tool_server_update(server, **data.validated_data)
        except services.ToolServerInvalid as exc:
            raise InputRefused(exc.errors) from None
        except services.ToolServerConflict as exc:
            return _conflict(exc)
        return Response(_output(server))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        services.tool_server_delete(_server(name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ToolServerDiscoverApi(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        request=None,
        responses={
            200: ToolServerOutput,
            502: OpenApiResponse(
                ErrorOutput,
                description="The server could not be reached or did not answer as an MCP "
                "server; `discovery_error` on the server says the same.",
            ),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        """Connect to the server, list its tools and store them."""
        server = _server(name)
        try:
            client.discover(server)
        except client.ToolError as exc:
            return Response({"errors": [f"$: {exc}"]}, status=status.HTTP_502_BAD_GATEWAY)
        return Response(_output(server))


class ToolListApi(APIView):
    @extend_schema(responses=ToolOutput(many=True))
    def get(self, request: Request) -> Response:
        """List the tools of the enabled servers (SERVER.TOOL), as last discovered."""
        return Response([tool.as_json() for tool in selectors.discovered_tools()])
