"""The fan-out's role of a connection, as the registry names it (``cluster/observe.py``):
an admin-only connection (ListGroups, DescribeCluster: the console's own, an AdminClient)
is drawn as ``admin``, not lumped into ``other``."""

from __future__ import annotations

from playwright.sync_api import Page

MAIN_ROLE = """async (cases) => {
    const { mainRole } = await import('/static/js/roles.js');
    return cases.map((roles) => mainRole(roles));
}"""


def test_each_registry_role_has_its_own_colour_in_the_fanout(static_page: Page) -> None:
    cases = [["admin"], ["bootstrap", "admin"], ["partition-leader", "admin"],
             ["group-coordinator", "partition-leader"], ["bootstrap"], []]
    assert static_page.evaluate(MAIN_ROLE, cases) == [
        "admin", "admin", "partition-leader", "group-coordinator", "bootstrap", "other"]
    # the stylesheet draws an admin line apart from "other"
    colours = static_page.evaluate("""() => {
        const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
        svg.setAttribute('class', 'fanout');
        const out = {};
        for (const role of ['admin', 'other']) {
            const line = document.createElementNS('http://www.w3.org/2000/svg', 'line');
            line.setAttribute('class', role);
            svg.append(line);
            document.body.append(svg);
            out[role] = getComputedStyle(line).stroke;
        }
        return out;
    }""")
    assert colours["admin"] != colours["other"], colours
