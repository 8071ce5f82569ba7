"""The audit's page and CI file for every audited kind: one self-contained HTML page (`html`),
its figures drawn off-screen (`figures`), and JUnit XML.  A kind supplies its findings, the
context its figures draw from and, where it has one, its own verdict; its checks declare the
figures that show their evidence."""
