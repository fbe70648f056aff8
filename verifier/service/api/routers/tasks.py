"""The operator's tasks: declared by an admin, read with a read token (docs/tasks.md)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from verifier.app import tasks
from verifier.service.api.bodies import TaskBody, TaskId, TaskPage, TaskRequest
from verifier.service.api.deps import Admin, Read, Service
from verifier.service.api.errors import responses

router = APIRouter()


@router.post(
    "/v1/tasks",
    status_code=201,
    response_model=TaskBody,
    tags=["tasks"],
    summary="Declare a task and its acceptance tests (admin)",
    responses={
        200: {"model": TaskBody, "description": "Already stored as given: nothing changed."},
        **responses(400, 401, 403, 409),
    },
)
async def post_task(request: TaskRequest, token: Admin, service: Service) -> JSONResponse:
    """Store a task: 201 when added (or replaced, with `replace`), 200 when stored as given
    already, 409 when its id is stored with other tests. A task the tasks file declares
    is refused (400): the file's would win. The act goes into the admin log."""
    view, changed = await run_in_threadpool(
        lambda: tasks.add(
            service.config,
            request.task_id,
            repository=request.repository,
            fail_to_pass=request.fail_to_pass,
            pass_to_pass=request.pass_to_pass,
            read_only=request.read_only,
            actor=f"token:{token.name}",
            replace=request.replace,
            store=service.store,
        )
    )
    body = TaskBody.model_validate(view.to_dict())
    return JSONResponse(body.model_dump(mode="json"), status_code=201 if changed else 200)


@router.get(
    "/v1/tasks",
    response_model=TaskPage,
    tags=["tasks"],
    summary="Every task in force: the tasks file's, then the store's",
    responses=responses(401, 403, 503),
)
async def list_tasks(token: Read, service: Service) -> TaskPage:
    views = await run_in_threadpool(tasks.tasks, service.config, store=service.store)
    return TaskPage(tasks=[TaskBody.model_validate(view.to_dict()) for view in views])


@router.get(
    "/v1/tasks/{task_id}",
    response_model=TaskBody,
    tags=["tasks"],
    summary="A task's tests, and where it was declared",
    responses=responses(401, 403, 404, 503),
)
async def get_task(task_id: TaskId, token: Read, service: Service) -> TaskBody:
    view = await run_in_threadpool(tasks.show, service.config, task_id, store=service.store)
    return TaskBody.model_validate(view.to_dict())
