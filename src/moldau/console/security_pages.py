"""The console's transactions page and security pages (ACLs, SCRAM users, client quotas)."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from . import extra
from .page_base import PageBase, _int
from .web import (
    CLUSTER_ERRORS,
    Refused,
    paginate,
    redirect,
)


class SecurityPages(PageBase):
    """``/transactions`` and ``/security`` with the ACL and SCRAM-user actions."""

    # ------------------------------------------------------------------------------------------ transactions
    async def transactions(self, request: web.Request) -> web.Response:
        snap = await self.view.snapshot()
        error = None
        txns: list[extra.Transaction] = []
        producers: list[extra.ProducerState] = []
        try:
            txns = await extra.transactions(self.view.admin)
        except CLUSTER_ERRORS as e:
            error = f"transactions: {e}"
        try:
            leaders = snap.leaders()
            producers = await extra.producers(self.view.admin, leaders)
        except CLUSTER_ERRORS as e:
            error = (error + "; " if error else "") + f"producers: {e}"
        hanging = extra.hanging(producers, txns, int(time.time() * 1000))
        tpage = paginate(
            request,
            txns,
            text=lambda t: f"{t.transactional_id} {t.state}",
            page_size=self.settings.page_size,
            keys={
                "id": lambda t: t.transactional_id,
                "state": lambda t: t.state,
                "pid": lambda t: t.producer_id,
                "start": lambda t: t.start_ms,
            },
            default_sort="id",
        )
        return self.render(
            request,
            "transactions.html",
            title="Transactions and producers",
            active="transactions",
            tpage=tpage,
            producers=producers[:500],
            producer_count=len(producers),
            hanging=hanging,
            error=error,
        )

    # ------------------------------------------------------------------------------------------ security
    async def security(self, request: web.Request) -> web.Response:
        acls: list[extra.Acl] = []
        users: list[extra.ScramUser] = []
        quotas: list[tuple[str, dict[str, float]]] = []
        errors: dict[str, str] = {}
        try:
            acls = await extra.describe_acls(self.view.admin)
        except CLUSTER_ERRORS as e:
            errors["acls"] = str(e)
        try:
            users = await extra.scram_users(self.view.admin)
        except CLUSTER_ERRORS as e:
            errors["users"] = str(e)
        try:
            quotas = await extra.client_quotas(self.view.admin)
        except CLUSTER_ERRORS as e:
            errors["quotas"] = str(e)
        apage = paginate(
            request,
            acls,
            text=lambda a: f"{a.resource_type} {a.resource_name} {a.principal} {a.operation} {a.permission}",
            page_size=self.settings.page_size,
            keys={
                "resource": lambda a: (a.resource_type, a.resource_name),
                "principal": lambda a: a.principal,
                "operation": lambda a: a.operation,
            },
            default_sort="resource",
        )
        return self.render(
            request,
            "security.html",
            title="Security",
            active="security",
            apage=apage,
            users=users,
            quotas=quotas,
            errors=errors,
            resource_types=list(extra.RESOURCE_TYPES)[1:],
            pattern_types=["LITERAL", "PREFIXED"],
            operations=list(extra.ACL_OPERATIONS)[1:],
            permissions=["ALLOW", "DENY"],
        )

    def _acl_from(self, f: Any) -> extra.Acl:
        return extra.Acl(
            str(f.get("resource_type", "TOPIC")),
            str(f.get("resource_name", "")).strip(),
            str(f.get("pattern_type", "LITERAL")),
            str(f.get("principal", "")).strip(),
            str(f.get("host", "*")).strip() or "*",
            str(f.get("operation", "READ")),
            str(f.get("permission", "ALLOW")),
        )

    async def acl_create(self, request: web.Request) -> web.Response:
        acl = self._acl_from(self.form(request))
        if not acl.principal.startswith("User:"):
            raise Refused("the principal must look like User:NAME")
        try:
            await extra.create_acl(self.view.admin, acl)
        except ValueError as e:
            raise Refused(str(e)) from None
        return redirect(
            "/security",
            f"created ACL {acl.permission} {acl.principal} {acl.operation} on "
            f"{acl.resource_type} {acl.resource_name}",
        )

    async def acl_delete(self, request: web.Request) -> web.Response:
        acl = self._acl_from(self.form(request))
        try:
            n = await extra.delete_acl(self.view.admin, acl)
        except ValueError as e:
            raise Refused(str(e)) from None
        return redirect("/security", f"deleted {n} ACL(s)")

    async def user_upsert(self, request: web.Request) -> web.Response:
        f = self.form(request)
        name = str(f.get("name", "")).strip()
        try:
            await extra.upsert_scram_user(
                self.view.admin,
                name,
                str(f.get("mechanism", "SCRAM-SHA-256")),
                str(f.get("password", "")),
                _int(f.get("iterations", "8192"), "iterations"),
            )
        except ValueError as e:
            raise Refused(str(e)) from None
        return redirect("/security", f"saved SCRAM credential of {name}")

    async def user_delete(self, request: web.Request) -> web.Response:
        f = self.form(request)
        name = str(f.get("name", "")).strip()
        try:
            await extra.delete_scram_user(self.view.admin, name, str(f.get("mechanism", "")))
        except ValueError as e:
            raise Refused(str(e)) from None
        return redirect("/security", f"deleted SCRAM credential of {name}")
